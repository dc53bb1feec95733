#!/bin/sh
# SeaweedFS for the tiered compose (docker/object-store.Dockerfile): master, volume server, filer
# and S3 gateway in one `weed server` process, then the bucket $OBJECT_STORE_BUCKET created over
# S3 (idempotent: a restart finds it there). Why here and not in the brokers: kafkapy, like
# Kafka's S3 plugins, expects the bucket to exist (docs/tiered-storage.md).
#
# Without an identities file SeaweedFS accepts any credentials (and unsigned requests), which is
# what a local compose wants; arguments are appended to `weed server`'s (later flags win), e.g.
# `-s3.config=/etc/seaweedfs/s3.json` to require keys. SIGTERM is passed on to weed.
set -eu
bucket="${OBJECT_STORE_BUCKET:-kafkapy-tiered}"

weed server -dir=/data -ip=127.0.0.1 -ip.bind=0.0.0.0 -filer -s3 -s3.port=8333 \
  -s3.port.iceberg=0 -s3.port.lance=0 -s3.iam=false -master.volumeSizeLimitMB=1024 \
  -volume.preStopSeconds=0 "$@" &
weed_pid=$!
trap 'kill -TERM "$weed_pid" 2>/dev/null || true' TERM INT

python3 - "$bucket" "$weed_pid" <<'PY'
import os, sys, time, urllib.error, urllib.request

bucket, weed_pid = sys.argv[1], int(sys.argv[2])
while True:
    try:
        os.kill(weed_pid, 0)
    except OSError:
        sys.exit(0)  # weed is gone: the shell below reports its exit status
    try:
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:8333/{bucket}", method="PUT"), timeout=5)
        break
    except urllib.error.HTTPError as exc:
        if exc.code == 409:  # BucketAlreadyOwnedByYou: created by an earlier start
            break
    except OSError:
        pass  # S3 gateway not listening yet
    time.sleep(0.5)
print(f"object-store: bucket {bucket} ready", flush=True)
PY

set +e
wait "$weed_pid"
status=$?
if kill -0 "$weed_pid" 2>/dev/null; then  # wait ended by the trapped signal: weed still draining
  wait "$weed_pid"
  status=$?
fi
exit "$status"
