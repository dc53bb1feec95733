from kafkapy.protocol.errors import CorruptRecordError, ErrorCode, ProtocolError


def test_error_codes_are_unique_and_carry_retriable_flags() -> None:
    codes = [e.value for e in ErrorCode]
    assert len(codes) == len(set(codes))
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable
    assert not ErrorCode.UNSUPPORTED_VERSION.retriable
    assert ErrorCode(16) is ErrorCode.NOT_COORDINATOR


def test_protocol_error_subclasses_map_to_kafka_codes() -> None:
    err = CorruptRecordError("bad crc")
    assert isinstance(err, ProtocolError)
    assert err.error_code is ErrorCode.CORRUPT_MESSAGE
    assert ProtocolError("x", ErrorCode.INVALID_TOPIC_EXCEPTION).error_code == 17
