"""SASL state machine and mechanisms (kafkapy.protocol.sasl): known answers, refusals, fuzzing.

Invariant checked throughout: any client input either authenticates or raises `SaslError`, never
any other exception, and a failed session accepts nothing more.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.sasl import (
    PlainServer,
    SaslError,
    SaslSession,
    SaslState,
    ScramClient,
    ScramCredential,
    ScramServer,
    plain_token,
)

USERS = {"alice": "alice-secret", "user": "pencil"}


def _check(user: str, password: str) -> bool:
    return USERS.get(user) == password


@functools.cache  # PBKDF2 per call would make the property tests slow
def _creds(mechanism: str) -> dict[str, ScramCredential]:
    return {u: ScramCredential.from_password(mechanism, p) for u, p in USERS.items()}


def _scram_client(
    mechanism: str, user: str, password: str, server: ScramServer, nonce: str = "cn0nce"
) -> bytes:
    """A by-the-RFC SCRAM client run against `server`; returns the server-final message."""
    algo = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    first_bare = f"n={user},r={nonce}"
    server_first = server.evaluate(f"n,,{first_bare}".encode()).decode()
    attrs = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        algo, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"])
    )
    client_key = hmac.digest(salted, b"Client Key", algo)
    without_proof = f"c=biws,r={attrs['r']}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.digest(hashlib.new(algo, client_key).digest(), auth_message, algo)
    proof = base64.b64encode(
        bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    ).decode()
    final = server.evaluate(f"{without_proof},p={proof}".encode()).decode()
    expected = hmac.digest(hmac.digest(salted, b"Server Key", algo), auth_message, algo)
    assert final == "v=" + base64.b64encode(expected).decode()  # the client verifies the server
    return final.encode()


# -- PLAIN --------------------------------------------------------------------------------------
def test_plain_accepts_the_right_password_and_names_the_principal() -> None:
    server = PlainServer(_check)
    assert server.evaluate(b"\0alice\0alice-secret") == b""
    assert server.complete
    assert server.principal == "alice"
    authz = PlainServer(_check)
    authz.evaluate(b"alice\0alice\0alice-secret")  # authzid equal to the user is allowed
    assert authz.principal == "alice"


@pytest.mark.parametrize(
    "token",
    [b"\0alice\0wrong", b"\0bob\0alice-secret", b"\0alice\0", b"\0\0alice-secret", b"alice\0alice-secret",
     b"bob\0alice\0alice-secret", b"\xff\0alice\0alice-secret", b"\0alice\0alice-secret\0extra"],
)  # fmt: skip
def test_plain_refuses_bad_credentials_and_malformed_tokens(token: bytes) -> None:
    server = PlainServer(_check)
    with pytest.raises(SaslError) as info:
        server.evaluate(token)
    assert info.value.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert not server.complete


# -- SCRAM --------------------------------------------------------------------------------------
def test_scram_sha256_rfc7677_example() -> None:
    """RFC 7677 section 3: the exact messages of the worked example (user "user", "pencil")."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = ScramCredential.from_password(
        "SCRAM-SHA-256", "pencil", salt=salt, iterations=4096
    )
    server = ScramServer(
        "SCRAM-SHA-256", {"user": credential}.get, nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    )
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert (
        first
        == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    final = server.evaluate(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete
    assert server.principal == "user"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_round_trip_and_wrong_password(mechanism: str) -> None:
    creds = _creds(mechanism)
    server = ScramServer(mechanism, creds.get)
    _scram_client(mechanism, "alice", "alice-secret", server)
    assert server.principal == "alice"
    with pytest.raises(SaslError, match="already finished"):
        server.evaluate(b"n,,n=alice,r=x")
    wrong = ScramServer(mechanism, creds.get)
    with pytest.raises(SaslError, match="Invalid client credentials"):
        _scram_client(mechanism, "alice", "nope", wrong)
    assert not wrong.complete


def test_scram_refuses_unknown_users_channel_binding_tokens_and_tampering() -> None:
    creds = _creds("SCRAM-SHA-256")
    for first in [b"n,,n=mallory,r=abc", b"p=tls-unique,,n=alice,r=abc", b"n,,r=abc,n=alice",
                  b"n,,n=alice,r=abc,tokenauth=true", b"n,,n=al=ice,r=abc", b"n,,n=alice", b"garbage"]:  # fmt: skip
        with pytest.raises(SaslError):
            ScramServer("SCRAM-SHA-256", creds.get).evaluate(first)
    server = ScramServer("SCRAM-SHA-256", creds.get, nonce=lambda: "SRV")
    server.evaluate(b"n,,n=alice,r=abc")
    with pytest.raises(SaslError, match="nonce"):
        server.evaluate(b"c=biws,r=abcXXX,p=AAAA")
    server = ScramServer("SCRAM-SHA-256", creds.get, nonce=lambda: "SRV")
    server.evaluate(b"n,,n=alice,r=abc")
    with pytest.raises(SaslError, match="channel binding"):
        server.evaluate(b"c=eSws,r=abcSRV,p=AAAA")


def test_credential_from_salted_password_matches_from_password() -> None:
    salt = b"0123456789abcdef"
    salted = hashlib.pbkdf2_hmac("sha512", b"pw", salt, 4096)
    assert ScramCredential.from_salted_password("SCRAM-SHA-512", salted, salt, 4096) == (
        ScramCredential.from_password("SCRAM-SHA-512", "pw", salt=salt, iterations=4096)
    )


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.binary(max_size=200), min_size=1, max_size=3),
    st.sampled_from(["SCRAM-SHA-256", "PLAIN"]),
)
def test_mechanisms_raise_only_sasl_error(tokens: list[bytes], mechanism: str) -> None:
    creds = _creds("SCRAM-SHA-256")
    server = PlainServer(_check) if mechanism == "PLAIN" else ScramServer(mechanism, creds.get)
    for token in tokens:
        try:
            server.evaluate(token)
        except SaslError:
            return


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet="nrcpsiayt=,:01+/", max_size=60),
    st.text(alphabet="nrcpsiayt=,:01+/", max_size=80),
)
def test_scram_parser_on_near_valid_text(first: str, final: str) -> None:
    server = ScramServer("SCRAM-SHA-256", _creds("SCRAM-SHA-256").get)
    try:
        server.evaluate(("n,,n=alice,r=" + first).encode())
        server.evaluate(final.encode())
    except SaslError:
        return
    raise AssertionError("a made-up proof authenticated")


# -- the session state machine ------------------------------------------------------------------
def _session() -> SaslSession:
    return SaslSession({"PLAIN": lambda: PlainServer(_check)})


def test_session_flow_v1_and_legacy_v0() -> None:
    session = _session()
    session.check_request(ApiKey.API_VERSIONS)
    assert session.handshake("PLAIN", 1) == ErrorCode.NONE
    assert session.state is SaslState.AUTHENTICATE
    assert not session.legacy
    session.check_request(ApiKey.SASL_AUTHENTICATE)
    assert session.authenticate(b"\0alice\0alice-secret") == b""
    assert session.state is SaslState.COMPLETE
    assert session.principal == "alice"
    legacy = _session()
    assert legacy.handshake("PLAIN", 0) == ErrorCode.NONE
    assert legacy.legacy


def test_session_refuses_out_of_order_requests_and_unknown_mechanisms() -> None:
    session = _session()
    with pytest.raises(SaslError) as info:
        session.check_request(ApiKey.PRODUCE)
    assert info.value.error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert "PRODUCE" in info.value.reason
    assert session.state is SaslState.FAILED
    with pytest.raises(SaslError):
        session.check_request(ApiKey.API_VERSIONS)  # failed for good
    session = _session()
    assert session.handshake("GSSAPI", 1) == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert session.state is SaslState.FAILED
    assert session.enabled_mechanisms == ["PLAIN"]
    session = _session()
    with pytest.raises(SaslError):
        session.authenticate(b"\0alice\0alice-secret")  # no handshake yet
    session = _session()
    session.handshake("PLAIN", 1)
    with pytest.raises(SaslError) as info:
        session.check_request(ApiKey.SASL_HANDSHAKE)  # a second handshake
    assert info.value.error_code == ErrorCode.ILLEGAL_SASL_STATE
    session = _session()
    session.handshake("PLAIN", 1)
    with pytest.raises(SaslError):
        session.authenticate(b"\0alice\0bad")
    assert session.state is SaslState.FAILED
    assert session.principal is None


_ops = st.one_of(
    st.tuples(st.just("request"), st.integers(-5, 80)),
    st.tuples(
        st.just("handshake"),
        st.sampled_from(["PLAIN", "SCRAM-SHA-256", "", "plain"]),
        st.integers(0, 1),
    ),
    st.tuples(st.just("token"), st.binary(max_size=40)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ops, max_size=8))
def test_session_only_raises_sasl_error_and_never_completes_without_a_password(
    ops: list[tuple[object, ...]],
) -> None:
    session = _session()
    for op in ops:
        try:
            if op[0] == "request":
                session.check_request(int(op[1]))  # type: ignore[call-overload]
            elif op[0] == "handshake":
                session.handshake(str(op[1]), int(op[2]))  # type: ignore[call-overload]
            else:
                session.authenticate(bytes(op[1]))  # type: ignore[arg-type]
        except SaslError:
            assert session.state is SaslState.FAILED
    assert session.state is not SaslState.COMPLETE  # random tokens never hit alice's password


def test_scram_accepts_old_librdkafkas_doubled_client_nonce_only() -> None:
    """librdkafka < 2.6.1 (librdkafka#4895) echoes cnonce + (cnonce + snonce); Kafka 3.8.1-3.9
    accepted it and so do we, but the server nonce must still be there."""
    creds = _creds("SCRAM-SHA-256")
    server = ScramServer("SCRAM-SHA-256", creds.get, nonce=lambda: "SRV")
    first = server.evaluate(b"n,,n=alice,r=abc")
    assert first.startswith(b"r=abcSRV,")
    with pytest.raises(
        SaslError, match="Invalid client credentials"
    ):  # nonce accepted, proof wrong
        server.evaluate(b"c=biws,r=abcabcSRV,p=" + base64.b64encode(bytes(32)))
    server = ScramServer("SCRAM-SHA-256", creds.get, nonce=lambda: "SRV")
    server.evaluate(b"n,,n=alice,r=abc")
    with pytest.raises(SaslError, match="nonce"):
        server.evaluate(b"c=biws,r=abcabc,p=" + base64.b64encode(bytes(32)))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_against_the_server(mechanism: str) -> None:
    """The client side a node authenticates to another node with: right password in, server
    signature checked; a wrong password is refused by the server, a forged server-final by the
    client."""
    server = ScramServer(mechanism, _creds(mechanism).get)
    client = ScramClient(mechanism, "alice", "alice-secret")
    client.final(server.evaluate(client.final_message(server.evaluate(client.first()))))
    assert server.principal == "alice"
    wrong = ScramServer(mechanism, _creds(mechanism).get)
    bad = ScramClient(mechanism, "alice", "nope")
    with pytest.raises(SaslError):
        wrong.evaluate(bad.final_message(wrong.evaluate(bad.first())))
    forged = ScramClient(mechanism, "alice", "alice-secret")
    honest = ScramServer(mechanism, _creds(mechanism).get)
    forged.final_message(honest.evaluate(forged.first()))
    with pytest.raises(SaslError, match="signature"):
        forged.final(b"v=" + base64.b64encode(b"x" * 32))
    with pytest.raises(SaslError, match="refused"):
        forged.final(b"e=invalid-proof")


def test_plain_token_authenticates() -> None:
    server = PlainServer(_check)
    server.evaluate(plain_token("alice", "alice-secret"))
    assert server.principal == "alice"


@settings(max_examples=200)
@given(st.binary(max_size=300))
def test_scram_client_never_crashes_on_server_bytes(data: bytes) -> None:
    client = ScramClient("SCRAM-SHA-256", "alice", "x")
    client.first()
    with contextlib.suppress(SaslError):  # the only exception allowed
        client.final_message(data)
    with contextlib.suppress(SaslError):
        client.final(data)
