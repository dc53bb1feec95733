"""The broker layer: what a request means, below the trio runtime that carries it (`kafkapy.server`).

Nothing here imports trio (import-linter contract, TYPE_CHECKING imports included): configuration
and its rules, the partition facade, the coordinator runtime and its group and transaction
drivers, transaction markers, producer state, fetch sessions, the topic store, statistics and
the test fault injector. Its `async` code waits through the runtime port (`runtime.Runtime`),
which the server layer implements over trio and installs; what it uses of the cluster node and
the replica manager is named as Protocols in `ports`.
"""
