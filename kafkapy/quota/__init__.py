"""Client quota enforcement (KIP-13 / KIP-124 / KIP-219) as plain classes taking `now_ms`:
the rate sensors and the throttle arithmetic; the server mutes connections (see
`kafkapy.server.connection`)."""
