"""Listener security: TLS contexts, the SASL user database, per-listener requirements.

The SASL state machine and mechanisms are sans-IO (`kafkapy.protocol.sasl`); the connection
(`kafkapy.server.connection`) runs the exchange before serving anything else, and the app
(`kafkapy.server.app`) wraps TLS listeners' sockets in `trio.SSLStream`.
"""

from kafkapy.server.security.credentials import CredentialStore
from kafkapy.server.security.listener import ListenerSecurity, listener_security, ssl_context

__all__ = [
    "CredentialStore",
    "ListenerSecurity",
    "listener_security",
    "ssl_context",
]
