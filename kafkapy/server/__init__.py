"""The trio runtime: listeners, connections, TLS/SASL transport, the cluster's network peers.

Importing the package installs trio as the broker layer's runtime port
(`kafkapy.broker.runtime`), so the broker layer's waits are trio's wherever a server part runs.
"""

from kafkapy.server.runtime import install as _install_runtime

_install_runtime()
