"""The broker layer waits through the runtime port; the server package installs trio's on import,
as every process that runs the broker layer does."""

import kafkapy.server  # noqa: F401  (installs the trio runtime: kafkapy.broker.runtime)
