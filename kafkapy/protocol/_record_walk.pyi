"""The C per-record loop of `record_walk` (`_record_walk.c`), when built."""

from kafkapy.protocol.records import Buffer

class RecordFault(Exception):
    """args: (record index, fault kind, value, extra): see `record_walk._FAULT_MESSAGES`."""

def walk(
    data: Buffer, start: int, end: int, count: int, require_key: bool, low: int, high: int, /
) -> tuple[int, int, list[int], list[tuple[int, int]]]: ...
