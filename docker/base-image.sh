#!/usr/bin/env bash
# Build a local base image (default tag kafkapy-base:bookworm): Debian bookworm minbase with
# python3 and its venv module, from Debian's own packages via debootstrap, for machines where
# no registry image can be pulled. `make docker-test` builds the kafkapy image on it
# (BASE_IMAGE build argument); users keep the Dockerfile's public default.
# Needs root, debootstrap and a running Docker engine; about a minute.
set -euo pipefail
tag="${1:-kafkapy-base:bookworm}"
root="$(mktemp -d /tmp/kafkapy-rootfs.XXXXXX)"
trap 'rm -rf "$root"' EXIT
# DEBIAN_MIRROR: optional mirror URL; debootstrap's own default otherwise
debootstrap --variant=minbase --include=python3,python3-venv bookworm "$root" ${DEBIAN_MIRROR:+"$DEBIAN_MIRROR"} >/dev/null
# what a container never reads: downloaded .debs, package lists, docs, man pages, translations
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
  "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/*
tar -C "$root" -c . | docker import -c 'CMD ["/bin/bash"]' - "$tag" >/dev/null
echo "built $tag"
