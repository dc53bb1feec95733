"""Build record batches offline with kafka-python's own batch builder and store them here.

Run `.venv/bin/python -m tests.protocol.batches.capture_kafka_python` from the repository root to
re-capture `kafka_python_<codec>.bin`; the tests check both the stored bytes and freshly built
ones against `EXPECTED`.

kafka-python compresses snappy through the `python-snappy` module, which is not a dependency
here; `snappy_shim()` stands in for it with the same two cramjam calls python-snappy (0.7+) is
itself built on, so the xerial framing around the blocks is still kafka-python's own code.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from pathlib import Path

import cramjam
import kafka.codec
from kafka.record import MemoryRecordsBuilder

HERE = Path(__file__).parent
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
BASE_TIMESTAMP = 1_700_000_000_000
PRODUCER = (4242, 7, 100)  # producer id, epoch, base sequence (an idempotent producer)

# (timestamp, key, value, headers): compressible values so every codec really compresses
# (kafka-python falls back to an uncompressed batch otherwise).
EXPECTED: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
    (BASE_TIMESTAMP + i * 7, f"key-{i}".encode() if i % 4 else None,
     (f"value {i} " * (i + 20)).encode() if i != 5 else None,
     [("trace", f"t{i}".encode()), ("empty", b""), ("null", None)][: i % 4])
    for i in range(40)
]


def snappy_shim() -> types.SimpleNamespace:
    return types.SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
    )


@contextlib.contextmanager
def kafka_python_snappy() -> Iterator[None]:
    """Let kafka-python's codec module use snappy for the duration (see module docstring)."""
    saved = kafka.codec.snappy
    kafka.codec.snappy = snappy_shim()
    try:
        yield
    finally:
        kafka.codec.snappy = saved


def build(codec: int, *, idempotent: bool = True) -> bytes:
    """One batch of EXPECTED built by kafka-python's MemoryRecordsBuilder with `codec`."""
    pid, epoch, seq = PRODUCER if idempotent else (-1, -1, -1)
    builder = MemoryRecordsBuilder(
        magic=2, compression_type=codec, batch_size=1 << 20,
        producer_id=pid, producer_epoch=epoch, base_sequence=seq,
    )
    with kafka_python_snappy():
        for timestamp, key, value, headers in EXPECTED:
            if builder.append(timestamp, key, value, headers) is None:
                raise RuntimeError("kafka-python batch full")
        builder.close()
    return bytes(builder.records()._buffer)


def fixture_path(codec: int) -> Path:
    return HERE / f"kafka_python_{CODEC_NAMES[codec]}.bin"


def main() -> None:
    for codec in CODEC_NAMES:
        data = build(codec)
        fixture_path(codec).write_bytes(data)
        print(f"{fixture_path(codec).name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
