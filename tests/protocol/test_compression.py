"""Compression codecs: round trips, both snappy framings, caps, and bad input -> ProtocolError."""

from __future__ import annotations

import gzip
import struct
import tracemalloc
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol.compression import (
    XERIAL_MAGIC,
    Compression,
    UnsupportedCompressionError,
    compress,
    compress_snappy_raw,
    compress_snappy_xerial,
    decompress,
)
from kafkapy.protocol.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    ProtocolError,
)

CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
COMPRESSED = CODECS[1:]
MiB = 1024 * 1024

# Compressible but not trivial: repeated text with some varying bytes.
SAMPLE = b"".join(b"record-%06d:" % i + bytes(range(i % 200)) for i in range(400))


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_sample(codec: Compression) -> None:
    packed = compress(codec, SAMPLE)
    if codec is not Compression.NONE:
        assert len(packed) < len(SAMPLE)
    assert decompress(codec, packed, len(SAMPLE)) == SAMPLE


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_empty(codec: Compression) -> None:
    assert decompress(codec, compress(codec, b""), 0) == b""


@settings(max_examples=60, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=4096))
def test_round_trip_property(codec: Compression, data: bytes) -> None:
    packed = compress(codec, memoryview(bytearray(data)))
    assert decompress(codec, memoryview(packed), len(data)) == data


@pytest.mark.parametrize("codec", COMPRESSED)
def test_output_one_byte_over_cap_is_refused(codec: Compression) -> None:
    packed = compress(codec, SAMPLE)
    with pytest.raises(InvalidRecordError, match="exceed"):
        decompress(codec, packed, len(SAMPLE) - 1)


@pytest.mark.parametrize("codec_id", [5, 6, 7, -1, 255])
def test_unknown_codec_ids(codec_id: int) -> None:
    with pytest.raises(UnsupportedCompressionError) as info:
        decompress(codec_id, b"abc", 100)
    assert info.value.error_code is ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    with pytest.raises(UnsupportedCompressionError):
        compress(codec_id, b"abc")


# --- codec specifics: what other implementations write must read back -------------------------


def test_gzip_reads_stdlib_gzip_and_concatenated_members() -> None:
    assert decompress(Compression.GZIP, gzip.compress(SAMPLE), len(SAMPLE)) == SAMPLE
    two = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(Compression.GZIP, two, 100) == b"first second"


def test_gzip_output_is_gzip_container() -> None:
    # Java's GZIPInputStream needs the gzip container, not bare zlib.
    packed = compress(Compression.GZIP, SAMPLE)
    assert packed[:2] == b"\x1f\x8b"
    assert gzip.decompress(packed) == SAMPLE


def test_gzip_rejects_trailing_garbage() -> None:
    with pytest.raises(CorruptRecordError):
        decompress(Compression.GZIP, gzip.compress(SAMPLE) + b"junk", 10 * len(SAMPLE))


def test_snappy_raw_as_librdkafka_writes_it() -> None:
    raw = compress_snappy_raw(SAMPLE)
    assert not raw.startswith(XERIAL_MAGIC)
    assert decompress(Compression.SNAPPY, raw, len(SAMPLE)) == SAMPLE


def test_snappy_xerial_layout_as_java_writes_it() -> None:
    data = SAMPLE * 20  # several 32 KiB blocks
    framed = compress_snappy_xerial(data)
    magic, version, compat = struct.unpack_from(">8sii", framed)
    assert (magic, version, compat) == (XERIAL_MAGIC, 1, 1)
    # Walk the chunks by hand: int32 length + raw snappy block, each <= 32 KiB uncompressed.
    pos, blocks = 16, []
    while pos < len(framed):
        (size,) = struct.unpack_from(">i", framed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(framed[pos + 4 : pos + 4 + size])))
        pos += 4 + size
    assert pos == len(framed)
    assert all(len(b) <= 32 * 1024 for b in blocks)
    assert b"".join(blocks) == data
    assert compress(Compression.SNAPPY, data) == framed
    assert decompress(Compression.SNAPPY, framed, len(data)) == data


def test_snappy_xerial_hand_built_with_odd_blocks() -> None:
    parts = [b"alpha" * 3, b"", b"beta" * 1000]
    framed = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    for part in parts:
        block = bytes(cramjam.snappy.compress_raw(part))
        framed += struct.pack(">i", len(block)) + block
    assert decompress(Compression.SNAPPY, framed, 10_000) == b"".join(parts)


def test_snappy_declared_length_checked_before_inflating() -> None:
    # A raw block's header declares its length; a lie above the cap is refused up front.
    raw = compress_snappy_raw(b"x" * 100_000)
    with pytest.raises(InvalidRecordError):
        decompress(Compression.SNAPPY, raw, 99_999)


def test_lz4_reads_linked_and_independent_frames_and_concatenation() -> None:
    linked = lz4.frame.compress(SAMPLE, block_linked=True)
    assert decompress(Compression.LZ4, linked, len(SAMPLE)) == SAMPLE
    two = lz4.frame.compress(b"one") + lz4.frame.compress(b"two")
    assert decompress(Compression.LZ4, two, 10) == b"onetwo"


def test_zstd_reads_frames_without_content_size_and_concatenation() -> None:
    streamed = zstandard.ZstdCompressor(write_content_size=False, write_checksum=True).compress(
        SAMPLE
    )
    assert decompress(Compression.ZSTD, streamed, len(SAMPLE)) == SAMPLE
    two = zstandard.ZstdCompressor().compress(b"one") + zstandard.ZstdCompressor().compress(b"2")
    assert decompress(Compression.ZSTD, two, 10) == b"one2"


def test_zstd_frame_demanding_a_huge_window_is_refused() -> None:
    # The decoder allocates the window a frame's header asks for; 128 MiB for 3 KiB of data.
    params = zstandard.ZstdCompressionParameters(window_log=27, enable_ldm=True)
    cobj = zstandard.ZstdCompressor(compression_params=params).compressobj()
    packed = cobj.compress(b"abc" * 1000) + cobj.flush()
    with pytest.raises(InvalidRecordError, match="window"):
        decompress(Compression.ZSTD, packed, MiB)


def test_zstd_skippable_frame_is_skipped() -> None:
    skippable = struct.pack("<II", 0x184D2A5A, 3) + b"abc"
    packed = skippable + zstandard.ZstdCompressor().compress(b"payload")
    assert decompress(Compression.ZSTD, packed, 100) == b"payload"


# --- bad input: only ProtocolError, corrupt data as CorruptRecordError -----------------------


@pytest.mark.parametrize("codec", COMPRESSED)
def test_every_truncation_is_corrupt(codec: Compression) -> None:
    data = SAMPLE[:3000]
    packed = compress(codec, data)
    for cut in range(len(packed)):
        try:
            out = decompress(codec, packed[:cut], 10_000)
        except CorruptRecordError:
            continue
        # Only xerial snappy has inner boundaries (after its header and after each chunk) where
        # a cut leaves a complete, shorter stream; it must then decode to a prefix. (The batch
        # layer still rejects it: too few records.)
        assert codec is Compression.SNAPPY, f"cut at {cut} of {len(packed)} decoded"
        assert data.startswith(out)
        assert len(out) < len(data)


@settings(max_examples=150, deadline=None)
@given(
    codec=st.sampled_from(COMPRESSED),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 7)), min_size=1, max_size=4),
)
def test_bit_flips_only_protocol_errors(codec: Compression, flips: list[tuple[int, int]]) -> None:
    packed = bytearray(compress(codec, SAMPLE[:2000]))
    for where, bit in flips:
        packed[where % len(packed)] ^= 1 << bit
    try:
        out = decompress(codec, bytes(packed), 4000)
    except ProtocolError:
        return
    assert len(out) <= 4000


@settings(max_examples=150, deadline=None)
@given(codec=st.sampled_from(COMPRESSED), junk=st.binary(max_size=300))
def test_garbage_only_protocol_errors(codec: Compression, junk: bytes) -> None:
    for data in (junk, XERIAL_MAGIC + junk):
        try:
            out = decompress(codec, data, 1000)
        except ProtocolError:
            continue
        assert len(out) <= 1000


# --- decompression bombs: refused with bounded memory ----------------------------------------


def _gzip_bomb(size: int) -> bytes:
    comp = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(MiB)
    parts = [comp.compress(zeros) for _ in range(size // MiB)]
    parts.append(comp.flush())
    return b"".join(parts)


@pytest.mark.timeout(120)
def test_one_gib_gzip_bomb_refused_with_bounded_memory() -> None:
    bomb = _gzip_bomb(1024 * MiB)
    assert len(bomb) < 2 * MiB  # about 1 MiB expanding to 1 GiB
    cap = 16 * MiB
    tracemalloc.start()
    try:
        with pytest.raises(InvalidRecordError):
            decompress(Compression.GZIP, bomb, cap)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * cap


@pytest.mark.timeout(120)
@pytest.mark.parametrize("codec", [Compression.LZ4, Compression.ZSTD, Compression.SNAPPY])
def test_bombs_of_other_codecs_refused_with_bounded_memory(codec: Compression) -> None:
    # 256 MiB of zeros, streamed through each codec's own compressor in 1 MiB steps.
    zeros = bytes(MiB)
    if codec is Compression.LZ4:
        comp = lz4.frame.LZ4FrameCompressor(block_linked=False)
        bomb = comp.begin() + b"".join(comp.compress(zeros) for _ in range(256)) + comp.flush()
    elif codec is Compression.ZSTD:
        cobj = zstandard.ZstdCompressor().compressobj()
        bomb = b"".join(cobj.compress(zeros) for _ in range(256)) + cobj.flush()
    else:
        block = bytes(cramjam.snappy.compress_raw(bytes(32 * 1024)))
        chunk = struct.pack(">i", len(block)) + block
        bomb = XERIAL_MAGIC + struct.pack(">ii", 1, 1) + chunk * (8 * 1024)
    cap = 8 * MiB
    tracemalloc.start()
    try:
        with pytest.raises(InvalidRecordError):
            decompress(codec, bomb, cap)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * cap + len(bomb)
