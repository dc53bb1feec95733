"""SASL on the broker side, sans-IO: the per-connection state machine and the mechanisms.

Why here and not in the server: authentication is bytes in, bytes out plus a little state, so it
is tested (and fuzzed) without sockets, exactly like the codec. The server's connection only moves
frames between the socket and `SaslSession`.

Rules of the state machine (`SaslSession`), as Kafka's SaslServerAuthenticator has them:
1. A new connection on a SASL listener is in HANDSHAKE: only ApiVersions and SaslHandshake may
   come. SaslHandshake names a mechanism; an unknown one -> UNSUPPORTED_SASL_MECHANISM (with the
   enabled list) and the session FAILED.
2. After the handshake the session is in AUTHENTICATE. SaslHandshake v1 means every token comes
   in a SaslAuthenticate request (KIP-152); v0 means the legacy KIP-43 flow: the next frames are raw
   SASL tokens (size-prefixed, no Kafka header) answered by raw size-prefixed tokens.
3. The mechanism finishing moves the session to COMPLETE (the connection then serves everything);
   any failure raises `SaslError` and leaves it FAILED (the connection answers and closes).
4. Anything else at any point (another API before COMPLETE, a second handshake) is a `SaslError`
   with ILLEGAL_SASL_STATE.

Mechanisms: PLAIN (RFC 4616) and SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802/7677, the subset Kafka
speaks: no channel binding, the `tokenauth` extension refused). Every bad input - undecodable
UTF-8, a missing attribute, a wrong proof - raises `SaslError`, never anything else.

The client side (`plain_token`, `ScramClient`) is what a kafkapy node uses to authenticate to
another node's SASL listener (inter-broker and controller traffic) and what the CLI uses.

Not supported: GSSAPI (Kerberos), OAUTHBEARER, delegation tokens, re-authentication (KIP-368;
`session_lifetime_ms` 0 means "never expires").
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.errors import ErrorCode, ProtocolError

__all__ = [
    "SCRAM_MECHANISMS",
    "SCRAM_MECHANISM_TYPES",
    "SUPPORTED_MECHANISMS",
    "PlainServer",
    "SaslError",
    "SaslMechanism",
    "SaslSession",
    "SaslState",
    "ScramClient",
    "ScramCredential",
    "ScramServer",
    "plain_token",
]

#: SCRAM mechanism name -> hashlib name
SCRAM_MECHANISMS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
SUPPORTED_MECHANISMS: tuple[str, ...] = ("PLAIN", *SCRAM_MECHANISMS)
#: Kafka's ScramMechanism type bytes (admin requests, metadata records) -> mechanism name
SCRAM_MECHANISM_TYPES: dict[int, str] = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
#: Kafka's bounds for SCRAM iterations (ScramMechanism.minIterations / maxIterations)
SCRAM_MIN_ITERATIONS = 4096
SCRAM_MAX_ITERATIONS = 16384
#: the longest token we look at; real PLAIN/SCRAM messages are a few hundred bytes
MAX_TOKEN_BYTES = 64 * 1024


class SaslError(ProtocolError):
    """Authentication failed or the client broke the SASL sequence.

    `error_code` is SASL_AUTHENTICATION_FAILED (bad credentials, bad token), ILLEGAL_SASL_STATE
    (a request out of order) or UNSUPPORTED_SASL_MECHANISM; the reason is safe to send to the
    client (it never says whether the user or the password was wrong)."""

    error_code = ErrorCode.SASL_AUTHENTICATION_FAILED


class SaslMechanism(Protocol):
    """One authentication exchange of one mechanism: client tokens in, server tokens out."""

    @property
    def complete(self) -> bool: ...

    @property
    def principal(self) -> str | None: ...

    def evaluate(self, token: bytes) -> bytes:
        """The answer to the client's next token; raises SaslError when authentication fails."""
        ...


def _text(token: bytes) -> str:
    if len(token) > MAX_TOKEN_BYTES:
        raise SaslError(f"SASL token of {len(token)} bytes is too long")
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslError("SASL token is not valid UTF-8") from None


class PlainServer:
    """SASL/PLAIN: one message `[authzid] NUL authcid NUL password`, answered with no bytes.

    `check(user, password)` is the credential lookup (constant-time comparison is its job)."""

    def __init__(self, check: Callable[[str, str], bool]) -> None:
        self._check = check
        self._principal: str | None = None

    @property
    def complete(self) -> bool:
        return self._principal is not None

    @property
    def principal(self) -> str | None:
        return self._principal

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslError("PLAIN takes a single message", ErrorCode.ILLEGAL_SASL_STATE)
        parts = _text(token).split("\0")
        if len(parts) != 3:
            raise SaslError("Invalid SASL/PLAIN request: expected 3 tokens")
        authzid, user, password = parts
        if not user:
            raise SaslError("Authentication failed: username not specified")
        if not password:
            raise SaslError("Authentication failed: password not specified")
        if authzid and authzid != user:
            raise SaslError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        if not self._check(user, password):
            raise SaslError("Authentication failed: Invalid username or password")
        self._principal = user
        return b""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What a broker stores for a SCRAM user (never the password): RFC 5802's keys."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # the keys let whoever has them check password guesses offline
        return f"ScramCredential(iterations={self.iterations})"

    @classmethod
    def from_salted_password(
        cls, mechanism: str, salted_password: bytes, salt: bytes, iterations: int
    ) -> ScramCredential:
        """The form AlterUserScramCredentials sends (the client salts the password itself)."""
        algo = SCRAM_MECHANISMS[mechanism]
        client_key = hmac.digest(salted_password, b"Client Key", algo)
        return cls(
            salt=salt,
            stored_key=hashlib.new(algo, client_key).digest(),
            server_key=hmac.digest(salted_password, b"Server Key", algo),
            iterations=iterations,
        )

    @classmethod
    def from_password(
        cls,
        mechanism: str,
        password: str,
        *,
        salt: bytes | None = None,
        iterations: int = SCRAM_MIN_ITERATIONS,
    ) -> ScramCredential:
        salt = secrets.token_bytes(32) if salt is None else salt
        salted = hashlib.pbkdf2_hmac(
            SCRAM_MECHANISMS[mechanism], password.encode("utf-8"), salt, iterations
        )
        return cls.from_salted_password(mechanism, salted, salt, iterations)


def _scram_attributes(message: str) -> list[tuple[str, str]]:
    """`a=v,b=w,...` -> [(a, v), ...]; SaslError unless every part is one letter, '=', value."""
    out: list[tuple[str, str]] = []
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=" or not part[0].isalpha():
            raise SaslError(f"Invalid SCRAM message attribute {part[:32]!r}")
        out.append((part[0], part[2:]))
    return out


def _scram_name(value: str) -> str:
    """RFC 5802 saslname: '=2C' is ',' and '=3D' is '='; any other '=' is invalid."""
    if value.replace("=2C", "").replace("=3D", "").count("="):
        raise SaslError("Invalid SCRAM username encoding")
    return value.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """SCRAM-SHA-256/512 server side: client-first -> server-first, client-final -> server-final.

    `lookup(user)` gives the user's stored `ScramCredential` for this mechanism, or None. An
    unknown user fails at the first message with the same reason as a wrong password."""

    def __init__(
        self,
        mechanism: str,
        lookup: Callable[[str], ScramCredential | None],
        *,
        nonce: Callable[[], str] | None = None,
    ) -> None:
        if mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.mechanism = mechanism
        self._algo = SCRAM_MECHANISMS[mechanism]
        self._lookup = lookup
        self._nonce = nonce or (lambda: secrets.token_urlsafe(24))
        self._step = 0
        self._user: str | None = None
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2_header = ""
        self._client_nonce = ""
        self._combined_nonce = ""
        self._principal: str | None = None

    @property
    def complete(self) -> bool:
        return self._principal is not None

    @property
    def principal(self) -> str | None:
        return self._principal

    def evaluate(self, token: bytes) -> bytes:
        message = _text(token)
        if self._step == 0:
            self._step = 1
            return self._client_first(message).encode()
        if self._step == 1:
            self._step = 2
            return self._client_final(message).encode()
        raise SaslError("SCRAM exchange already finished", ErrorCode.ILLEGAL_SASL_STATE)

    def _client_first(self, message: str) -> str:
        # gs2-header: "n,," or "y,," (no channel binding) with an optional "a=authzid"
        flag, sep1, rest = message.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep1 or not sep2:
            raise SaslError("Invalid SCRAM client-first message")
        if flag not in ("n", "y"):
            raise SaslError("SCRAM channel binding is not supported")
        if authzid and not authzid.startswith("a="):
            raise SaslError("Invalid SCRAM authorization id")
        parts = bare.split(",")
        attrs = _scram_attributes(",".join(parts[:2]))
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
            raise SaslError("Invalid SCRAM client-first message: expected n=user,r=nonce")
        if "tokenauth=true" in parts[2:]:  # Kafka's extension for delegation tokens
            raise SaslError("Delegation token authentication is not supported")
        user = _scram_name(attrs[0][1])
        if authzid and _scram_name(authzid[2:]) != user:
            raise SaslError("Authentication failed: authorization id differs from username")
        credential = self._lookup(user) if user else None
        if credential is None:
            raise SaslError("Authentication failed: Invalid user credentials")
        self._user, self._credential = user, credential
        self._gs2_header = f"{flag},{authzid},"
        self._client_first_bare = bare
        self._client_nonce = attrs[1][1]
        self._combined_nonce = attrs[1][1] + self._nonce()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._combined_nonce},s={salt},i={credential.iterations}"
        return self._server_first

    def _client_final(self, message: str) -> str:
        attrs = _scram_attributes(message)
        if len(attrs) < 3 or attrs[0][0] != "c" or attrs[1][0] != "r" or attrs[-1][0] != "p":
            raise SaslError("Invalid SCRAM client-final message: expected c=,r=,...,p=")
        try:
            binding = base64.b64decode(attrs[0][1], validate=True)
            proof = base64.b64decode(attrs[-1][1], validate=True)
        except binascii.Error:
            raise SaslError("Invalid base64 in SCRAM client-final message") from None
        if binding != self._gs2_header.encode():
            raise SaslError("SCRAM channel binding does not match the client-first message")
        # librdkafka before 2.6.1 (Debian's kcat has 2.0.2) sends the client nonce twice:
        # cnonce + (cnonce + snonce). Kafka 3.8.1-3.9 accepted that; a dev broker must too. The
        # server's fresh nonce is still required, so nothing is replayable.
        if attrs[1][1] not in (self._combined_nonce, self._client_nonce + self._combined_nonce):
            raise SaslError("Invalid SCRAM nonce")
        credential = self._credential
        assert credential is not None  # step 1 set it
        without_proof = message[: message.rindex(",p=")]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = hmac.digest(credential.stored_key, auth_message, self._algo)
        if len(proof) != len(client_signature):
            raise SaslError("Authentication failed: Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(
            hashlib.new(self._algo, client_key).digest(), credential.stored_key
        ):
            raise SaslError("Authentication failed: Invalid client credentials")
        self._principal = self._user
        server_signature = hmac.digest(credential.server_key, auth_message, self._algo)
        return "v=" + base64.b64encode(server_signature).decode()


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


#: APIs a client may send in each state before authentication completes
_ALLOWED: dict[SaslState, frozenset[int]] = {
    SaslState.HANDSHAKE: frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE}),
    SaslState.AUTHENTICATE: frozenset({ApiKey.SASL_AUTHENTICATE}),
}


class SaslSession:
    """One connection's SASL state (see the module doc's rules).

    `mechanisms` maps each enabled mechanism name to a factory of a fresh `SaslMechanism`."""

    def __init__(self, mechanisms: Mapping[str, Callable[[], SaslMechanism]]) -> None:
        self._factories = dict(mechanisms)
        self.state = SaslState.HANDSHAKE
        self.legacy = False  # KIP-43: tokens travel as raw frames (after SaslHandshake v0)
        self.mechanism_name: str | None = None
        self._mechanism: SaslMechanism | None = None

    @property
    def enabled_mechanisms(self) -> list[str]:
        return list(self._factories)

    @property
    def principal(self) -> str | None:
        return (
            self._mechanism.principal
            if self.state is SaslState.COMPLETE and self._mechanism
            else None
        )

    def check_request(self, api_key: int) -> None:
        """Raise SaslError (ILLEGAL_SASL_STATE) unless `api_key` may come now."""
        if api_key not in _ALLOWED.get(self.state, frozenset()):
            phase = self.state.value
            self.state = SaslState.FAILED
            try:
                name = ApiKey(api_key).name
            except ValueError:
                name = str(api_key)
            raise SaslError(
                f"Unexpected Kafka request of type {name} during SASL {phase}",
                ErrorCode.ILLEGAL_SASL_STATE,
            )

    def handshake(self, mechanism: str, version: int) -> ErrorCode:
        """SaslHandshake: NONE and AUTHENTICATE, or UNSUPPORTED_SASL_MECHANISM and FAILED."""
        self.check_request(ApiKey.SASL_HANDSHAKE)
        factory = self._factories.get(mechanism)
        if factory is None:
            self.state = SaslState.FAILED
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM
        self.mechanism_name = mechanism
        self._mechanism = factory()
        self.legacy = version == 0
        self.state = SaslState.AUTHENTICATE
        return ErrorCode.NONE

    def authenticate(self, token: bytes) -> bytes:
        """One client token (from SaslAuthenticate or a legacy raw frame) -> the server's answer."""
        if self.state is not SaslState.AUTHENTICATE or self._mechanism is None:
            self.state = SaslState.FAILED
            raise SaslError(
                "SASL token before a successful handshake", ErrorCode.ILLEGAL_SASL_STATE
            )
        try:
            answer = self._mechanism.evaluate(token)
        except SaslError:
            self.state = SaslState.FAILED
            raise
        if self._mechanism.complete:
            self.state = SaslState.COMPLETE
        return answer


# -- the client side --------------------------------------------------------------------------


def plain_token(user: str, password: str) -> bytes:
    """PLAIN's one client token (RFC 4616, no authorization identity)."""
    return f"\0{user}\0{password}".encode()


class ScramClient:
    """The client side of SCRAM (RFC 5802) as Kafka speaks it: no channel binding. Tokens:
    `first()`, then `final_message(server_first)`, then `final(server_final)` checks the server's
    signature; a bad or refusing server message raises SaslError."""

    def __init__(self, mechanism: str, user: str, password: str) -> None:
        if mechanism not in SCRAM_MECHANISMS:
            raise SaslError(f"{mechanism} is not a SCRAM mechanism")
        self.hash = SCRAM_MECHANISMS[mechanism]
        self.password = password.encode()
        self.nonce = secrets.token_urlsafe(24)
        name = user.replace("=", "=3D").replace(",", "=2C")
        self.first_bare = f"n={name},r={self.nonce}"
        self.expected_signature = b""

    def first(self) -> bytes:
        return f"n,,{self.first_bare}".encode()

    def final_message(self, server_first: bytes) -> bytes:
        text = _text(server_first)
        attrs = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s", ""), attrs.get("i", "")
        if "e" in attrs:
            raise SaslError(f"SCRAM: the server refused: {attrs['e']}")
        if not nonce.startswith(self.nonce) or not iterations.isdigit():
            raise SaslError("SCRAM: the server's first message is not valid")
        if not SCRAM_MIN_ITERATIONS <= int(iterations) <= SCRAM_MAX_ITERATIONS:
            raise SaslError(f"SCRAM: {iterations} iterations is outside Kafka's bounds")
        try:
            salt_bytes = base64.b64decode(salt, validate=True)
        except binascii.Error:
            raise SaslError("SCRAM: the server's salt is not base64") from None
        salted = hashlib.pbkdf2_hmac(self.hash, self.password, salt_bytes, int(iterations))
        client_key = hmac.digest(salted, b"Client Key", self.hash)
        stored = hashlib.new(self.hash, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth = f"{self.first_bare},{text},{without_proof}".encode()
        signature = hmac.digest(stored, auth, self.hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.digest(salted, b"Server Key", self.hash)
        self.expected_signature = hmac.digest(server_key, auth, self.hash)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def final(self, server_final: bytes) -> None:
        attrs = dict(i.split("=", 1) for i in _text(server_final).split(",") if "=" in i)
        if "e" in attrs:
            raise SaslError(f"SCRAM: the server refused: {attrs['e']}")
        try:
            signature = base64.b64decode(attrs.get("v", ""), validate=True)
        except binascii.Error:
            signature = b""
        if not hmac.compare_digest(signature, self.expected_signature):
            raise SaslError("SCRAM: the server's signature does not match")
