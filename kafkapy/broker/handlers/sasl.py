"""SaslHandshake (key 17) v0-1 and SaslAuthenticate (key 36) v0-2 once authentication is over.

Behaviour: the real SASL exchange happens before a connection is served at all
(`kafkapy.server.authenticator`); these handlers only see the requests that arrive
afterwards - on a listener without SASL, or a second handshake on an authenticated connection -
and answer ILLEGAL_SASL_STATE, as Kafka does. Registering them is also what makes ApiVersions
advertise both APIs, which is how clients pick the SaslAuthenticate flow (KIP-152) over raw
tokens (KIP-43).

Not yet: re-authentication (KIP-368; we answer session_lifetime_ms 0, "never expires").
"""

from __future__ import annotations

from kafkapy.broker.context import RequestContext
from kafkapy.broker.handlers.registry import handler
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

__all__ = ["handle_sasl_authenticate", "handle_sasl_handshake"]


@handler(ApiKey.SASL_HANDSHAKE, min_version=0, max_version=1)
async def handle_sasl_handshake(
    ctx: RequestContext, req: SaslHandshakeRequest
) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])


@handler(ApiKey.SASL_AUTHENTICATE, min_version=0, max_version=2)
async def handle_sasl_authenticate(
    ctx: RequestContext, req: SaslAuthenticateRequest
) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=ErrorCode.ILLEGAL_SASL_STATE,
        error_message="SASL request on a listener without SASL or after authentication",
    )
