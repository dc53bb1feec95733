"""SCRAM credentials in the controller: AlterUserScramCredentials against a model, replayed
through the record codec and snapshots; the stored keys log a user in and hold no password."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.controller.controller import ScramDeletion, ScramUpsertion
from kafkapy.controller.records import encode_record
from kafkapy.controller.snapshot import decode_snapshot, encode_snapshot
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.sasl import SaslError, ScramClient, ScramCredential, ScramServer

from .helpers import Cluster

MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}

# weighted toward valid values, so most sequences store and delete credentials
names = st.sampled_from(["alice", "bob", "carol", "alice", "bob", "carol", ""])
mechanisms = st.sampled_from([1, 2, 1, 2, 1, 2, 0, 3])
deletions = st.builds(ScramDeletion, names, mechanisms)
upsertions = st.builds(
    ScramUpsertion,
    names,
    mechanisms,
    st.sampled_from([4096, 8192, 16384, 4096, 8192, 16384, 1, 4095, 16385]),
    st.sampled_from([b"salt-1", b"salt-2", b"salt-1", b"salt-2", b""]),
    st.sampled_from([b"salted-1", b"salted-2", b"salted-1", b"salted-2", b""]),
)
requests = st.tuples(st.lists(deletions, max_size=3), st.lists(upsertions, max_size=3))


def _first_problem(
    change: ScramDeletion | ScramUpsertion, model: dict[tuple[str, str], object]
) -> ErrorCode:
    """Kafka's check of one change, written as a table of the rules."""
    if change.name == "":
        return ErrorCode.UNACCEPTABLE_CREDENTIAL
    if change.mechanism not in MECHANISMS:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM
    if isinstance(change, ScramDeletion):
        known = (change.name, MECHANISMS[change.mechanism]) in model
        return ErrorCode.NONE if known else ErrorCode.RESOURCE_NOT_FOUND
    if not 4096 <= change.iterations <= 16384 or not change.salt or not change.salted_password:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL
    return ErrorCode.NONE


@settings(max_examples=150, deadline=None)
@given(st.lists(requests, max_size=8))
def test_alter_sequences_follow_the_model_and_replay_to_the_same_image(
    seq: list[tuple[list[ScramDeletion], list[ScramUpsertion]]],
) -> None:
    c = Cluster()
    # (user, mechanism name) -> (salt, salted password, iterations)
    model: dict[tuple[str, str], tuple[bytes, bytes, int]] = {}
    for dels, ups in seq:
        by_user: dict[str, list[ScramDeletion | ScramUpsertion]] = {}
        for change in [*dels, *ups]:
            by_user.setdefault(change.name, []).append(change)
        expected: dict[str, ErrorCode] = {}
        for user, changes in by_user.items():
            # a user's first change decides, unless it is fine and more follow
            code = _first_problem(changes[0], model)
            if code is ErrorCode.NONE and len(changes) > 1:
                code = ErrorCode.DUPLICATE_RESOURCE
            expected[user] = code
        results = c.run(c.ctl.alter_user_scram_credentials(dels, ups))
        assert [r.user for r in results] == list(by_user)
        assert {r.user: r.error for r in results} == expected
        for user, changes in by_user.items():
            if expected[user] is not ErrorCode.NONE:
                continue
            (change,) = changes
            key = (user, MECHANISMS[change.mechanism])
            if isinstance(change, ScramDeletion):
                del model[key]
            else:
                model[key] = (change.salt, change.salted_password, change.iterations)
        image = c.ctl.image
        assert set(image.scram_credentials) == set(model)
        for (user, mechanism), (salt, salted, iterations) in model.items():
            want = ScramCredential.from_salted_password(mechanism, salted, salt, iterations)
            assert image.scram_credentials[(user, mechanism)] == want
    raw = encode_snapshot(c.ctl.image, end_offset=c.ctl.image.offset + 1, epoch=1, timestamp_ms=0)
    assert decode_snapshot(raw)[1].scram_credentials == c.ctl.image.scram_credentials


def test_a_stored_credential_logs_the_user_in_and_no_record_holds_the_password() -> None:
    c = Cluster()
    password = "correct horse battery staple"
    salt = b"0123456789abcdef"
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, 8192)
    result = c.ctl.alter_user_scram_credentials(
        [], [ScramUpsertion("dave", 2, 8192, salt, salted)]
    )
    for record in result.records:
        raw = encode_record(record)
        assert password.encode() not in raw
        assert salted not in raw
    assert [r.error for r in c.run(result)] == [ErrorCode.NONE]
    stored = c.ctl.image.scram_credentials[("dave", "SCRAM-SHA-512")]
    assert repr(stored) == "ScramCredential(iterations=8192)"  # no key in a log line
    server = ScramServer("SCRAM-SHA-512", lambda user: stored if user == "dave" else None)
    client = ScramClient("SCRAM-SHA-512", "dave", password)
    final = client.final_message(server.evaluate(client.first()))
    client.final(server.evaluate(final))
    assert server.principal == "dave"
    wrong = ScramClient("SCRAM-SHA-512", "dave", "wrong")
    server = ScramServer("SCRAM-SHA-512", lambda user: stored)
    wrong_final = wrong.final_message(server.evaluate(wrong.first()))
    with pytest.raises(SaslError, match="Invalid client credentials"):
        server.evaluate(wrong_final)


def test_deleting_one_mechanism_keeps_the_other() -> None:
    c = Cluster()
    ups = [ScramUpsertion("erin", m, 4096, b"s", b"p") for m in (1, 2)]
    # one user twice in one request is refused (Kafka's rule), so one request per mechanism
    assert [r.error for r in c.run(c.ctl.alter_user_scram_credentials([], ups))] == [
        ErrorCode.DUPLICATE_RESOURCE
    ]
    for u in ups:
        assert [r.error for r in c.run(c.ctl.alter_user_scram_credentials([], [u]))] == [
            ErrorCode.NONE
        ]
    results = c.run(c.ctl.alter_user_scram_credentials([ScramDeletion("erin", 1)], []))
    assert [r.error for r in results] == [ErrorCode.NONE]
    assert set(c.ctl.image.scram_credentials) == {("erin", "SCRAM-SHA-512")}
    assert c.last_delta.changed_scram_users == {"erin"}


def test_more_changes_than_one_operation_may_write_are_refused_whole() -> None:
    c = Cluster()
    ups = [ScramUpsertion(f"user{i}", 1, 4096, b"s", b"p") for i in range(10_001)]
    result = c.ctl.alter_user_scram_credentials([], ups)
    assert result.records == []
    assert {r.error for r in c.run(result)} == {ErrorCode.INVALID_REQUEST}
    assert c.ctl.image.scram_credentials == {}
    assert len(c.run(c.ctl.alter_user_scram_credentials([], ups[:10_000]))) == 10_000
    assert len(c.ctl.image.scram_credentials) == 10_000
