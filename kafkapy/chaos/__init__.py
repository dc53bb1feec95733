"""`kafkapy chaos`: seeded faults against a local cluster and a checker of what clients saw.

schedule (seeded, pure) -> runner (cluster, faults, workloads) -> history -> checker (pure)
-> report; the command itself is kafkapy/cli/chaos.py.
"""
