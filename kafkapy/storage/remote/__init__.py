"""kafkapy.storage.remote: the remote tier of a partition log (KIP-405), files and objects only.

Layers, bottom-up: `object_store` (the port: put, ranged get, list, delete) and `s3` (its
implementation on boto3); `layout` (the objects a copied segment consists of and their keys);
`metadata` (Kafka's `__remote_log_metadata` records and their encoding) and `metadata_cache`
(the state machine applying them, per partition and for all partitions a broker replays); `copier` and `reader` (copying a rolled segment, serving a
fetch below the local log start). Everything is synchronous: the broker calls it from worker
threads. See docs/tiered-storage.md for what is wired into the broker and what is not yet.
"""
