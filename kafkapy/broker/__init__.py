"""The broker layer: what a request means, below the trio runtime that carries it (`kafkapy.server`).

Nothing here imports trio: configuration and its rules, the broker's clock, errors and
statistics, and the stores a request reads. The server layer builds these and hands them to the
listeners; the broker layer never reaches back up (import-linter contracts in pyproject.toml).
"""
