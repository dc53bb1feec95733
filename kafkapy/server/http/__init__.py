"""The broker's HTTP side: health and readiness checks, Prometheus metrics, the status page."""
