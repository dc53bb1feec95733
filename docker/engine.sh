#!/usr/bin/env bash
# Make sure a Docker engine answers: start dockerd in the background (as root) when it does not.
# The engine's log goes to ${DOCKERD_LOG:-/tmp/kafkapy-dockerd.log}. Needs Debian's docker.io
# (and docker-compose, debootstrap for `make docker-test`):
#   apt-get install -y docker.io docker-compose debootstrap
set -euo pipefail
if docker info >/dev/null 2>&1; then
  exit 0
fi
if ! command -v dockerd >/dev/null 2>&1; then
  echo "no Docker engine: apt-get install -y docker.io docker-compose debootstrap" >&2
  exit 1
fi
if [ "$(id -u)" != 0 ]; then
  echo "the Docker engine is not running and only root can start it (dockerd)" >&2
  exit 1
fi
log="${DOCKERD_LOG:-/tmp/kafkapy-dockerd.log}"
nohup dockerd >"$log" 2>&1 &
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then
    echo "started dockerd (log: $log)"
    exit 0
  fi
  sleep 0.5
done
echo "dockerd did not answer within 30 s; its log ($log) ends:" >&2
tail -20 "$log" >&2
exit 1
