# kafkapy broker image: a virtualenv with the kafkapy wheel, run as a non-root user, data in
# the /data volume, health = the HTTP listener's /readyz (README "Docker").
#
# Built from wheels: `make docker-image` first writes build/wheelhouse (`pip wheel` of kafkapy
# and its dependencies on the host), and the build installs only from there (--no-index), so it
# needs no network. Without a wheelhouse the build stage makes the wheels itself from the
# source and the package index. BASE_IMAGE: any image with python3 (3.11+) and its venv module;
# the default is the public python:3.11-slim (make docker-test builds a Debian one locally).
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
COPY pyproject.toml setup.py README.md /src/
COPY kafkapy /src/kafkapy
# the wildcard lets the build go on without a wheelhouse (pyproject.toml keeps COPY non-empty)
COPY pyproject.toml build/wheelhouse* /wheelhouse/
RUN set -eu; \
    python3 -m venv /opt/kafkapy; \
    if ls /wheelhouse/kafkapy-*.whl >/dev/null 2>&1; then \
        /opt/kafkapy/bin/pip install --no-cache-dir --no-index --find-links /wheelhouse kafkapy; \
    else \
        /opt/kafkapy/bin/pip wheel --no-cache-dir -w /tmp/wheels /src && \
        /opt/kafkapy/bin/pip install --no-cache-dir --no-index --find-links /tmp/wheels kafkapy; \
    fi; \
    /opt/kafkapy/bin/pip uninstall -y -q setuptools; /opt/kafkapy/bin/pip uninstall -y -q pip; \
    find /opt/kafkapy -name __pycache__ -prune -exec rm -rf {} +; \
    /opt/kafkapy/bin/python -m compileall -q /opt/kafkapy/lib

FROM ${BASE_IMAGE}
RUN set -eu; \
    useradd --system --uid 10001 --user-group --home-dir /data --no-create-home --shell /usr/sbin/nologin kafkapy; \
    mkdir -p /data; chown kafkapy:kafkapy /data
COPY --from=build /opt/kafkapy /opt/kafkapy
ENV PATH=/opt/kafkapy/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    KAFKAPY_LISTENERS=PLAINTEXT://0.0.0.0:9092 \
    KAFKAPY_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092 \
    KAFKAPY_HTTP_LISTENER=0.0.0.0:9644
USER kafkapy
WORKDIR /data
VOLUME ["/data"]
EXPOSE 9092 9644
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=5s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:9644/readyz', timeout=2).status != 200)"]
ENTRYPOINT ["kafkapy", "serve", "--data-dir", "/data"]
