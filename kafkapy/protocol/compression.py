"""Record-batch compression codecs: gzip, snappy (raw and xerial-framed), lz4 frame, zstd.

Why this module exists separately from `records`: the batch layer only needs "bytes in, bytes
out, bounded", and keeping the codec quirks here (xerial framing, multi-member gzip, zstd window
limits) keeps the batch code about batches.

Every decompressor takes `max_size` and streams with that cap, so a tiny compressed payload that
expands to gigabytes (a "zip bomb") is refused after at most about `max_size` bytes of output
are held, never after inflating it whole. Malformed compressed data raises `CorruptRecordError`
(the producer computed the CRC over garbage, so the batch is corrupt), output over the cap raises
`InvalidRecordError`, and an unknown codec id raises `UnsupportedCompressionError`. No other
exception escapes: the codec libraries' own errors are translated at this boundary.

Snappy has two wire shapes in Kafka. librdkafka writes plain ("raw") snappy blocks; the Java
client writes them wrapped in the framing of the xerial snappy-java library: a 16-byte header
(0x82 "SNAPPY" 0x00, then big-endian int32 version and compatible-version) followed by chunks,
each an int32 length and one raw snappy block. Both are accepted on decompress (recognised by the
magic, as every Kafka client does); `compress` writes the xerial shape by default because the
Java consumer (and every other client) reads it, while the raw shape is available for callers
that want it.

The codec libraries (cramjam for snappy, lz4, zstandard) are imported by the functions that
use them: a broker that never sees a batch of that codec does not pay for loading it (about
ten milliseconds of `kafkapy serve` start-up for the three).
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Callable

from kafkapy.protocol.errors import CorruptRecordError, ErrorCode, InvalidRecordError

__all__ = [
    "XERIAL_BLOCK_SIZE",
    "XERIAL_MAGIC",
    "Compression",
    "UnsupportedCompressionError",
    "compress",
    "compress_snappy_raw",
    "compress_snappy_xerial",
    "decompress",
]


class Compression(enum.IntEnum):
    """Codec ids as carried in the low three bits of a record batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class UnsupportedCompressionError(InvalidRecordError):
    """A codec id outside 0-4: answer UNSUPPORTED_COMPRESSION_TYPE."""

    error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


XERIAL_MAGIC = b"\x82SNAPPY\x00"
"""First 8 bytes of a xerial snappy-java stream."""

_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_VERSION = 1
_XERIAL_COMPAT = 1
_I32 = struct.Struct(">i")

XERIAL_BLOCK_SIZE = 32 * 1024
"""Uncompressed bytes per xerial chunk; snappy-java's default, so Java readers see familiar sizes."""

_STREAM_CHUNK = 256 * 1024
"""Output step for streaming decompressors: small enough that overshooting the cap by one step
costs little memory, large enough that the per-step Python overhead is negligible."""

_GZIP_WBITS = 16 + zlib.MAX_WBITS
"""zlib window bits selecting the gzip container (Kafka's gzip codec is gzip, not bare zlib)."""

_ZSTD_MIN_WINDOW = 8 * 1024 * 1024
_ZSTD_MAX_WINDOW = 128 * 1024 * 1024


def _codec(codec: int) -> Compression:
    try:
        return Compression(codec)
    except ValueError:
        raise UnsupportedCompressionError(f"unsupported compression codec id {codec}") from None


# ---------------------------------------------------------------------------------------------
# compression


def compress_snappy_raw(data: bytes | bytearray | memoryview) -> bytes:
    """One raw snappy block (what librdkafka produces)."""
    import cramjam

    return bytes(cramjam.snappy.compress_raw(data))


def compress_snappy_xerial(
    data: bytes | bytearray | memoryview, block_size: int = XERIAL_BLOCK_SIZE
) -> bytes:
    """The xerial snappy-java framing the Java client produces (header + length-prefixed blocks)."""
    import cramjam

    if block_size <= 0:
        raise ValueError("block_size must be positive")
    view = memoryview(data).cast("B")
    parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, _XERIAL_VERSION, _XERIAL_COMPAT)]
    for start in range(0, len(view), block_size):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + block_size]))
        parts.append(_I32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _compress_gzip(data: bytes | bytearray | memoryview) -> bytes:
    # Level 6 (zlib's default) rather than 9: the ratio gain at 9 is small and the cost large.
    comp = zlib.compressobj(6, zlib.DEFLATED, _GZIP_WBITS)
    return comp.compress(data) + comp.flush()


def _compress_lz4(data: bytes | bytearray | memoryview) -> bytes:
    import lz4.frame

    # Independent blocks: Kafka's Java LZ4 reader does not support linked blocks.
    return bytes(lz4.frame.compress(data, block_linked=False))


def _compress_zstd(data: bytes | bytearray | memoryview) -> bytes:
    import zstandard

    return bytes(zstandard.ZstdCompressor().compress(data))


_COMPRESSORS: dict[Compression, Callable[[bytes | bytearray | memoryview], bytes]] = {
    Compression.GZIP: _compress_gzip,
    Compression.SNAPPY: compress_snappy_xerial,
    Compression.LZ4: _compress_lz4,
    Compression.ZSTD: _compress_zstd,
}


def compress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Compress `data` (a batch's records region) with the codec id `codec`.

    Snappy output uses the xerial framing (see the module docstring); NONE returns a copy.
    """
    kind = _codec(codec)
    if kind is Compression.NONE:
        return bytes(data)
    return _COMPRESSORS[kind](data)


# ---------------------------------------------------------------------------------------------
# decompression


def _too_large(max_size: int) -> InvalidRecordError:
    return InvalidRecordError(f"decompressed records exceed the limit of {max_size} bytes")


def _decompress_gzip(data: memoryview, max_size: int) -> bytes:
    """Stream-inflate gzip, members concatenated as GZIPInputStream allows, capped at max_size."""
    out: list[bytes] = []
    total = 0
    pending: bytes | memoryview = data
    members = 0
    while True:
        inflater = zlib.decompressobj(_GZIP_WBITS)
        members += 1
        while True:
            try:
                chunk = inflater.decompress(pending, min(_STREAM_CHUNK, max_size - total + 1))
            except zlib.error as exc:
                raise CorruptRecordError(f"invalid gzip data: {exc}") from None
            total += len(chunk)
            if total > max_size:
                raise _too_large(max_size)
            out.append(chunk)
            pending = inflater.unconsumed_tail
            if inflater.eof:
                break
            if not chunk:  # zlib stops short only at the output cap, so no output = no input
                raise CorruptRecordError("truncated gzip data")
        rest = inflater.unused_data
        if not rest:
            break
        if rest[:2] != b"\x1f\x8b":
            raise CorruptRecordError("trailing bytes after gzip data")
        pending = rest
    return b"".join(out)


def _snappy_raw_len(block: bytes | memoryview) -> int:
    import cramjam

    try:
        return int(cramjam.snappy.decompress_raw_len(block))
    except Exception as exc:  # cramjam raises its own DecompressionError (and others)
        raise CorruptRecordError(f"invalid snappy block: {exc}") from None


def _snappy_raw_into(block: bytes | memoryview, target: memoryview) -> None:
    import cramjam

    try:
        written = int(cramjam.snappy.decompress_raw_into(block, target))
    except Exception as exc:
        raise CorruptRecordError(f"invalid snappy block: {exc}") from None
    if written != len(target):
        raise CorruptRecordError("snappy block shorter than its declared length")


def _decompress_snappy(data: memoryview, max_size: int) -> bytes:
    """Raw or xerial-framed snappy. Each block declares its length up front, so the total is
    checked against the cap before a byte is inflated, and the output is allocated once."""
    if len(data) >= _XERIAL_HEADER.size and data[:8] == XERIAL_MAGIC:
        blocks: list[tuple[memoryview, int]] = []
        total = 0
        pos = _XERIAL_HEADER.size
        end = len(data)
        while pos < end:
            if end - pos < 4:
                raise CorruptRecordError("truncated xerial snappy chunk length")
            (size,) = _I32.unpack_from(data, pos)
            pos += 4
            if size < 0 or size > end - pos:
                raise CorruptRecordError(f"xerial snappy chunk length {size} out of bounds")
            block = data[pos : pos + size]
            pos += size
            length = _snappy_raw_len(block)
            total += length
            if total > max_size:
                raise _too_large(max_size)
            blocks.append((block, length))
        out = bytearray(total)
        view = memoryview(out)
        at = 0
        for block, length in blocks:
            _snappy_raw_into(block, view[at : at + length])
            at += length
        return bytes(out)
    if 0 < len(data) < _XERIAL_HEADER.size and XERIAL_MAGIC.startswith(bytes(data[:8])):
        raise CorruptRecordError("truncated xerial snappy header")
    length = _snappy_raw_len(data)
    if length > max_size:
        raise _too_large(max_size)
    out = bytearray(length)
    _snappy_raw_into(data, memoryview(out))
    return bytes(out)


def _decompress_lz4(data: memoryview, max_size: int) -> bytes:
    """LZ4 frame format (concatenated frames allowed), capped at max_size."""
    import lz4.frame

    out: list[bytes] = []
    total = 0
    pending: bytes | memoryview = data
    while True:
        inflater = lz4.frame.LZ4FrameDecompressor()
        while True:
            try:
                chunk = inflater.decompress(pending, max_length=min(_STREAM_CHUNK, max_size - total + 1))
            except RuntimeError as exc:  # lz4 reports every frame error as RuntimeError
                raise CorruptRecordError(f"invalid lz4 frame: {exc}") from None
            pending = b""
            total += len(chunk)
            if total > max_size:
                raise _too_large(max_size)
            out.append(chunk)
            if inflater.eof:
                break
            if inflater.needs_input or not chunk:  # input exhausted mid-frame (or stalled)
                raise CorruptRecordError("truncated lz4 frame")
        rest = inflater.unused_data
        if not rest:
            break
        pending = rest
    return b"".join(out)


_ZSTD_FRAME_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MASK = 0xFFFFFFF0
_ZSTD_SKIPPABLE_MAGIC = 0x184D2A50
_U32LE = struct.Struct("<I")
_ZSTD_DICT_ID_BYTES = (0, 1, 2, 4)
_ZSTD_FCS_BYTES = (0, 2, 4, 8)


def _zstd_frames(data: memoryview) -> list[memoryview]:
    """Walk zstd frame and block headers (RFC 8878); return the data frames, which must tile
    `data` completely (skippable frames are dropped).

    Why: every python-zstandard streaming API returns b"" (no error) for a truncated frame, so a
    cut-off batch would silently decode to fewer records, and its bounded iterator stops after
    the first frame. The walk reads 3 bytes per block (a block regenerates up to 128 KiB),
    never the compressed content.
    """
    end = len(data)
    pos = 0
    frames: list[memoryview] = []
    if end == 0:
        raise CorruptRecordError("empty zstd data")
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError("truncated zstd frame magic")
        (magic,) = _U32LE.unpack_from(data, pos)
        pos += 4
        if magic & _ZSTD_SKIPPABLE_MASK == _ZSTD_SKIPPABLE_MAGIC:
            if end - pos < 4:
                raise CorruptRecordError("truncated zstd skippable frame")
            (size,) = _U32LE.unpack_from(data, pos)
            pos += 4 + size
            if pos > end:
                raise CorruptRecordError("truncated zstd skippable frame")
            continue
        if magic != _ZSTD_FRAME_MAGIC:
            raise CorruptRecordError("invalid zstd frame magic")
        start = pos - 4
        if pos >= end:
            raise CorruptRecordError("truncated zstd frame header")
        descriptor = data[pos]
        pos += 1
        if descriptor & 0x08:
            raise CorruptRecordError("reserved bit set in zstd frame header")
        single_segment = bool(descriptor & 0x20)
        fcs = _ZSTD_FCS_BYTES[descriptor >> 6]
        if fcs == 0 and single_segment:
            fcs = 1
        pos += (0 if single_segment else 1) + _ZSTD_DICT_ID_BYTES[descriptor & 0x03] + fcs
        while True:
            if end - pos < 3:
                raise CorruptRecordError("truncated zstd block header")
            header = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16)
            pos += 3
            block_type = (header >> 1) & 0x03
            if block_type == 3:
                raise CorruptRecordError("reserved zstd block type")
            pos += 1 if block_type == 1 else header >> 3
            if pos > end:
                raise CorruptRecordError("truncated zstd block")
            if header & 0x01:
                break
        if descriptor & 0x04:
            pos += 4
            if pos > end:
                raise CorruptRecordError("truncated zstd content checksum")
        frames.append(data[start:pos])
    return frames


def _zstd_window_limit(max_size: int) -> int:
    """Cap the decoder window (memory zstd allocates on the word of a frame's own header) near
    the output cap: a legitimate frame never needs a window much larger than its content."""
    window = _ZSTD_MIN_WINDOW
    while window < max_size and window < _ZSTD_MAX_WINDOW:
        window *= 2
    return window


def _decompress_zstd(data: memoryview, max_size: int) -> bytes:
    """zstd (concatenated frames allowed): framing checked, then streamed and capped."""
    import zstandard

    frames = _zstd_frames(data)
    window_limit = _zstd_window_limit(max_size)
    out: list[bytes] = []
    total = 0
    try:
        dctx = zstandard.ZstdDecompressor(max_window_size=window_limit)
        for frame in frames:
            window = zstandard.get_frame_parameters(frame).window_size
            if window > window_limit:
                raise InvalidRecordError(
                    f"zstd frame window of {window} bytes exceeds the limit of {window_limit}"
                )
            for chunk in dctx.read_to_iter(frame, write_size=_STREAM_CHUNK):
                total += len(chunk)
                if total > max_size:
                    raise _too_large(max_size)
                out.append(chunk)
    except zstandard.ZstdError as exc:
        raise CorruptRecordError(f"invalid zstd data: {exc}") from None
    return b"".join(out)


_DECOMPRESSORS: dict[Compression, Callable[[memoryview, int], bytes]] = {
    Compression.GZIP: _decompress_gzip,
    Compression.SNAPPY: _decompress_snappy,
    Compression.LZ4: _decompress_lz4,
    Compression.ZSTD: _decompress_zstd,
}


def decompress(codec: int, data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    """Inflate `data` compressed with codec id `codec`, refusing output over `max_size` bytes.

    Raises `UnsupportedCompressionError` for an unknown codec, `CorruptRecordError` for data
    that does not decode, `InvalidRecordError` when the output would exceed `max_size`.
    """
    kind = _codec(codec)
    if max_size < 0:
        raise ValueError("max_size must be non-negative")
    view = memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    if kind is Compression.NONE:
        if len(view) > max_size:
            raise _too_large(max_size)
        return bytes(view)
    return _DECOMPRESSORS[kind](view, max_size)
