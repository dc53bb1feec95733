"""`kafkapy dump-log FILE...` (kafka-dump-log.sh): what is in a data directory's files.

Every format is read with the project's own decoders, so the tool shows what the broker will
read and checks the same things: segments (`.log`: batches, with `--print-data-log` records,
control records as transaction markers; CRC checked per batch), offset and time indexes
(`.index`, `.timeindex`, with a sanity check against the segment beside them), aborted
transaction indexes (`.txnindex`), producer-state snapshots (`<offset>.snapshot`), the text
checkpoints (`offsets.checkpoint`, `leader-epoch-checkpoint`, `partition.metadata`,
`quorum-state`) and the metadata log's snapshots (`<offset>-<epoch>.checkpoint`).

Record keys and values are decoded as what they are for the internal topics: `__consumer_offsets`
(`--offsets-decoder`), `__transaction_state` (`--transaction-log-decoder`) and
`__cluster_metadata` (`--cluster-metadata-decoder`); each is on by default for a file inside that
topic's partition directory. A damaged file is reported (where, and what the decoder said) and
the tool goes on with the next file; the exit status is then 1.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import mmap
import re
import struct
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from kafkapy.cli.common import bytes_to_json
from kafkapy.protocol.errors import ProtocolError
from kafkapy.protocol.records import (
    BatchHeader,
    Record,
    decode_records,
    iter_batches,
    parse_control_record,
    validate_batch,
)

__all__ = ["dump_log"]

Decoder = Callable[[bytes | None, bytes | None], tuple[Any, Any]]
_METADATA_SNAPSHOT = re.compile(r"^\d{20}-\d{10}\.checkpoint$")
_CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}


def _plain(obj: Any) -> Any:
    """A decoded record (dataclasses, enums, bytes, UUIDs) as JSON-ready values."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {"type": type(obj).__name__, **{f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}}
    if isinstance(obj, enum.Enum):
        return obj.name
    if isinstance(obj, bytes | bytearray | memoryview):
        return bytes_to_json(bytes(obj))
    if isinstance(obj, uuid.UUID):
        return str(obj)
    if isinstance(obj, dict):
        return {str(_plain(k)): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [_plain(v) for v in obj]
    return obj


# -- decoders of the internal topics -------------------------------------------------------------

def _offsets_decoder(key: bytes | None, value: bytes | None) -> tuple[Any, Any]:
    from kafkapy.coordinator.group.records import decode_key, decode_value

    k = decode_key(key or b"")
    return _plain(k), _plain(decode_value(k, value))


def _txn_decoder(key: bytes | None, value: bytes | None) -> tuple[Any, Any]:
    from kafkapy.coordinator.txn.records import (
        RecordKeyType,
        decode_key,
        decode_metadata_value,
        decode_producer_id_block_value,
    )

    kind, tid = decode_key(key or b"")
    if value is None:
        return {"type": kind.name, "transactional_id": tid}, None
    decoded = (decode_metadata_value(tid or "", value) if kind == RecordKeyType.TRANSACTION_METADATA
               else decode_producer_id_block_value(value))
    return {"type": kind.name, "transactional_id": tid}, _plain(decoded)


#: what a SCRAM credential record's keys print as: with them anyone can check password guesses
#: offline, so a dump pasted into a ticket must not carry them (Kafka's RecordRedactor)
REDACTED = "(redacted)"


def _metadata_decoder(key: bytes | None, value: bytes | None) -> tuple[Any, Any]:
    from kafkapy.controller.records import UserScramCredentialRecord, decode_record

    if not value:
        return _plain(key) if key else None, "leader epoch start (no-op)"
    record = decode_record(value)
    shown = _plain(record)
    if isinstance(record, UserScramCredentialRecord):
        shown.update(salt=REDACTED, stored_key=REDACTED, server_key=REDACTED)
    return _plain(key) if key else None, shown


DECODERS: dict[str, Decoder] = {
    "__consumer_offsets": _offsets_decoder,
    "__transaction_state": _txn_decoder,
    "__cluster_metadata": _metadata_decoder,
}


def _decoder_for(path: Path, forced: str | None) -> Decoder | None:
    if forced is not None:
        return DECODERS[forced]
    topic = path.resolve().parent.name.rpartition("-")[0]
    return DECODERS.get(topic)


# -- segments ------------------------------------------------------------------------------------

def _map(path: Path) -> memoryview:
    with path.open("rb") as f:
        if path.stat().st_size == 0:
            return memoryview(b"")
        return memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))


def _record_doc(header: BatchHeader, record: Record, decoder: Decoder | None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "offset": header.base_offset + record.offset_delta,
        "timestamp": header.base_timestamp + record.timestamp_delta,
        "key_size": -1 if record.key is None else len(record.key),
        "value_size": -1 if record.value is None else len(record.value),
        "sequence": -1 if header.base_sequence < 0 else header.base_sequence + record.offset_delta,
        "headers": [[k, bytes_to_json(v)] for k, v in record.headers],
    }
    if header.is_control:
        try:
            commit, coordinator_epoch = parse_control_record(record)
            doc["control"] = {"marker": "COMMIT" if commit else "ABORT", "coordinator_epoch": coordinator_epoch}
        except ProtocolError:
            kind = struct.unpack(">hh", record.key)[1] if record.key and len(record.key) >= 4 else None
            doc["control"] = {"type": kind, "key": bytes_to_json(record.key), "value": bytes_to_json(record.value)}
        return doc
    if decoder is not None:
        try:
            doc["key"], doc["value"] = decoder(record.key, record.value)
            return doc
        except ProtocolError as e:
            doc["decode_error"] = str(e)
    doc["key"], doc["value"] = bytes_to_json(record.key), bytes_to_json(record.value)
    return doc


def _batch_doc(buf: memoryview, pos: int, h: BatchHeader, with_records: bool,
               decoder: Decoder | None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "base_offset": h.base_offset, "last_offset": h.last_offset, "count": h.records_count,
        "base_sequence": h.base_sequence,
        "last_sequence": -1 if h.base_sequence < 0 else h.base_sequence + h.last_offset_delta,
        "producer_id": h.producer_id, "producer_epoch": h.producer_epoch,
        "partition_leader_epoch": h.partition_leader_epoch, "is_transactional": h.is_transactional,
        "is_control": h.is_control, "position": pos,
        "timestamp_type": "LogAppendTime" if h.timestamp_type else "CreateTime",
        "max_timestamp": h.max_timestamp, "size": h.size, "magic": h.magic,
        "compression": None, "crc": h.crc, "is_valid": True,
    }
    try:
        doc["compression"] = h.compression.name.lower()
        validate_batch(buf, pos, h, allow_compacted=True)
    except ProtocolError as e:
        doc["is_valid"], doc["error"] = False, str(e)
    if with_records:
        try:
            doc["records"] = [_record_doc(h, r, decoder) for r in decode_records(buf, pos, h)]
        except ProtocolError as e:
            doc["records"], doc["is_valid"] = [], False
            doc["error"] = doc.get("error") or f"records: {e}"
    return doc


def dump_segment(path: Path, with_records: bool, decoder: Decoder | None) -> dict[str, Any]:
    buf = _map(path)
    doc: dict[str, Any] = {"file": str(path), "kind": "segment", "batches": [], "damage": []}
    try:
        for pos, header in iter_batches(buf):
            batch = _batch_doc(buf, pos, header, with_records, decoder)
            doc["batches"].append(batch)
            if not batch["is_valid"]:
                doc["damage"].append(f"batch at position {pos} (offsets {header.base_offset}-"
                                     f"{header.last_offset}): {batch['error']}")
    except ProtocolError as e:
        done = sum(b["size"] for b in doc["batches"])
        doc["damage"].append(f"at position {done} of {len(buf)} bytes: {e}")
    return doc


# -- indexes -------------------------------------------------------------------------------------

def _segment_beside(index: Path) -> Path:
    return index.parent / f"{index.name.partition('.')[0]}.log"


def _segment_batches(path: Path) -> dict[int, BatchHeader]:
    """The batch headers of the segment beside an index, by position (empty if none)."""
    log = _segment_beside(path)
    if not log.exists():
        return {}
    buf = _map(log)
    out: dict[int, BatchHeader] = {}
    try:
        for pos, header in iter_batches(buf):
            out[pos] = header
    except ProtocolError:
        pass  # the segment's own damage is reported when the segment is dumped
    return out


def _index_entries(path: Path, fmt: struct.Struct) -> tuple[list[tuple[int, int]], list[str]]:
    data = path.read_bytes()
    damage = [] if len(data) % fmt.size == 0 else [f"{len(data) % fmt.size} trailing bytes (not a whole entry)"]
    whole = len(data) - len(data) % fmt.size
    return [(a, b) for a, b in fmt.iter_unpack(data[:whole])], damage


def dump_offset_index(path: Path) -> dict[str, Any]:
    base = int(path.name.partition(".")[0])
    raw, damage = _index_entries(path, struct.Struct(">ii"))
    batches = _segment_batches(path)
    entries = []
    previous = (-1, -1)
    for n, (relative, position) in enumerate(raw):
        offset = base + relative
        if (offset, position) <= previous or position < previous[1]:
            damage.append(f"entry {n} (offset {offset}, position {position}) is not above the one before")
        h = batches.get(position)
        if batches and (h is None or not h.base_offset <= offset <= h.last_offset):
            found = "no batch starts there" if h is None else f"the batch there holds {h.base_offset}-{h.last_offset}"
            damage.append(f"entry {n}: offset {offset} at position {position}, but {found}")
        previous = (offset, position)
        entries.append({"offset": offset, "position": position})
    return {"file": str(path), "kind": "offset-index", "entries": entries, "damage": damage,
            "checked_against": str(_segment_beside(path)) if batches else None}


def dump_time_index(path: Path) -> dict[str, Any]:
    base = int(path.name.partition(".")[0])
    raw, damage = _index_entries(path, struct.Struct(">qi"))
    batches = _segment_batches(path)
    offsets = [(h.base_offset, h.last_offset, h.max_timestamp) for h in batches.values()]
    entries = []
    previous = (-1, -1)
    for n, (timestamp, relative) in enumerate(raw):
        offset = base + relative
        if timestamp < previous[0] or offset < previous[1]:
            damage.append(f"entry {n} (timestamp {timestamp}, offset {offset}) goes back")
        if offsets and not any(lo <= offset <= hi for lo, hi, _ in offsets):
            damage.append(f"entry {n}: offset {offset} is in no batch of the segment")
        elif offsets and timestamp > max(ts for _, _, ts in offsets):
            damage.append(f"entry {n}: timestamp {timestamp} is above every batch's max timestamp")
        previous = (timestamp, offset)
        entries.append({"timestamp": timestamp, "offset": offset})
    return {"file": str(path), "kind": "time-index", "entries": entries, "damage": damage,
            "checked_against": str(_segment_beside(path)) if batches else None}


def dump_txn_index(path: Path) -> dict[str, Any]:
    from kafkapy.storage.txn_index import TransactionIndex

    entries = TransactionIndex(path).entries
    size = path.stat().st_size
    damage = [] if size == len(entries) * 34 else [
        f"{size - len(entries) * 34} bytes after the {len(entries)} valid entries are not readable entries"]
    return {"file": str(path), "kind": "transaction-index", "damage": damage,
            "entries": [dataclasses.asdict(e) for e in entries]}


# -- snapshots and checkpoints -------------------------------------------------------------------

def dump_producer_snapshot(path: Path) -> dict[str, Any]:
    from kafkapy.coordinator.idempotence.snapshot import decode_snapshot

    doc: dict[str, Any] = {"file": str(path), "kind": "producer-snapshot", "damage": []}
    try:
        doc["snapshot"] = _plain(decode_snapshot(path.read_bytes()))
    except ProtocolError as e:
        doc["damage"].append(str(e))
    return doc


def dump_metadata_snapshot(path: Path, with_records: bool) -> dict[str, Any]:
    from kafkapy.controller.snapshot import SnapshotError, decode_snapshot

    doc = dump_segment(path, with_records, _metadata_decoder)
    doc["kind"] = "metadata-snapshot"
    try:
        header, _ = decode_snapshot(bytes(_map(path)))
        doc["header"] = _plain(header)
    except SnapshotError as e:
        doc["damage"].append(str(e))
    return doc


def dump_text_checkpoint(path: Path) -> dict[str, Any]:
    from kafkapy.storage.checkpoint import LeaderEpochCache, OffsetsCheckpoint, PartitionMetadata

    readers: dict[str, Callable[[Path], Any]] = {
        "offsets.checkpoint": OffsetsCheckpoint.read,
        "partition.metadata": PartitionMetadata.read,
        "leader-epoch-checkpoint": lambda d: LeaderEpochCache.load(d).entries,
    }
    doc: dict[str, Any] = {"file": str(path), "kind": "checkpoint", "damage": []}
    text = path.read_text(errors="replace")
    doc["text"] = text.splitlines()
    reader = readers.get(path.name)
    if path.name == "quorum-state":
        try:
            doc["parsed"] = json.loads(text)
        except json.JSONDecodeError as e:
            doc["damage"].append(f"not JSON: {e.msg} (line {e.lineno})")
    elif reader is not None:
        parsed = reader(path.parent)
        if parsed is None:
            doc["damage"].append("the broker cannot read this file (it would recover the partition fully)")
        else:
            doc["parsed"] = _plain(parsed)
    return doc


# a segment or index on its way in or out: a clean's output, Kafka's deletion and swap suffixes
_TRANSIENT = (".cleaned", ".deleted", ".swap")


def dump_file(path: Path, with_records: bool, decoder_name: str | None) -> dict[str, Any]:
    """The dump of one file, chosen by its name."""
    name = path.name
    for suffix in _TRANSIENT:
        name = name.removesuffix(suffix)
    if name.endswith(".log"):
        return dump_segment(path, with_records, _decoder_for(path, decoder_name))
    stem = name.partition(".")[0]
    if name.endswith(".index") and stem.isdigit():
        return dump_offset_index(path)
    if name.endswith(".timeindex") and stem.isdigit():
        return dump_time_index(path)
    if name.endswith(".txnindex"):
        return dump_txn_index(path)
    if name.endswith(".snapshot") and stem.isdigit():
        return dump_producer_snapshot(path)
    if _METADATA_SNAPSHOT.match(name):
        return dump_metadata_snapshot(path, with_records)
    if name in ("offsets.checkpoint", "partition.metadata", "leader-epoch-checkpoint", "quorum-state"):
        return dump_text_checkpoint(path)
    raise click.BadParameter(f"{path}: not a file kind dump-log knows", param_hint="FILE")


# -- text rendering ------------------------------------------------------------------------------

def _value_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)


def _record_line(r: dict[str, Any]) -> str:
    line = (f"| offset: {r['offset']} CreateTime: {r['timestamp']} keySize: {r['key_size']} "
            f"valueSize: {r['value_size']} sequence: {r['sequence']} "
            f"headerKeys: [{','.join(h[0] for h in r['headers'])}]")
    if "control" in r:
        c = r["control"]
        if "marker" in c:
            return f"{line} endTxnMarker: {c['marker']} coordinatorEpoch: {c['coordinator_epoch']}"
        return f"{line} controlType: {c['type']}"
    suffix = f" decodeError: {r['decode_error']}" if "decode_error" in r else ""
    return f"{line} key: {_value_text(r['key'])} payload: {_value_text(r['value'])}{suffix}"


def render(doc: dict[str, Any]) -> Iterator[str]:
    yield f"Dumping {doc['file']}"
    if "header" in doc:
        yield f"Snapshot header: {_value_text(doc['header'])}"
    for b in doc.get("batches", []):
        yield (f"baseOffset: {b['base_offset']} lastOffset: {b['last_offset']} count: {b['count']} "
               f"baseSequence: {b['base_sequence']} lastSequence: {b['last_sequence']} "
               f"producerId: {b['producer_id']} producerEpoch: {b['producer_epoch']} "
               f"partitionLeaderEpoch: {b['partition_leader_epoch']} isTransactional: "
               f"{str(b['is_transactional']).lower()} isControl: {str(b['is_control']).lower()} "
               f"position: {b['position']} {b['timestamp_type']}: {b['max_timestamp']} size: {b['size']} "
               f"magic: {b['magic']} compresscodec: {b['compression']} crc: {b['crc']} "
               f"isvalid: {str(b['is_valid']).lower()}")
        yield from (_record_line(r) for r in b.get("records", []))
    for e in doc.get("entries", []):
        yield " ".join(f"{k}: {v}" for k, v in e.items())
    if "snapshot" in doc:
        yield json.dumps(doc["snapshot"], indent=2, default=str)
    if doc["kind"] == "checkpoint":
        yield from doc["text"]
    for d in doc["damage"]:
        yield f"DAMAGE: {d}"


def _listed_files(listed: str | None) -> tuple[Path, ...]:
    """kafka-dump-log.sh's `--files a,b`, checked as the FILE arguments are."""
    paths = tuple(Path(p.strip()) for p in (listed or "").split(",") if p.strip())
    for path in paths:
        if not path.is_file():
            raise click.BadParameter(f"{path} is not a file", param_hint="--files")
    return paths


@click.command("dump-log")
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--files", "listed", metavar="F1,F2,...", help="kafka-dump-log.sh's spelling of FILE...")
@click.option("--print-data-log", "-d", is_flag=True, help="also print every record, not just batches")
@click.option("--deep-iteration", is_flag=True, help="kafka-dump-log.sh's flag: the same as --print-data-log")
@click.option("--offsets-decoder", "decoder", flag_value="__consumer_offsets",
              help="decode records as __consumer_offsets records")
@click.option("--transaction-log-decoder", "decoder", flag_value="__transaction_state",
              help="decode records as __transaction_state records")
@click.option("--cluster-metadata-decoder", "decoder", flag_value="__cluster_metadata",
              help="decode records as __cluster_metadata records")
@click.option("--json", "json_output", is_flag=True, help="print JSON for scripts")
def dump_log(files: tuple[Path, ...], listed: str | None, print_data_log: bool, deep_iteration: bool,
             decoder: str | None, json_output: bool) -> int:
    """Print segments, indexes, snapshots and checkpoints of a data directory (kafka-dump-log).

    Reads the files only; the broker may keep running. Exit status 1 when a file is damaged.
    """
    files += _listed_files(listed)
    if not files:
        raise click.UsageError("name the files (FILE... or --files F1,F2)")
    print_data_log = print_data_log or deep_iteration
    docs = []
    for path in files:
        doc = dump_file(path, print_data_log or decoder is not None, decoder)
        docs.append(doc)
        if not json_output:
            for line in render(doc):
                click.echo(line)
    if json_output:
        click.echo(json.dumps(docs, indent=2, default=str))
    damaged = [d["file"] for d in docs if d["damage"]]
    for name in damaged:
        click.echo(f"kafkapy: {name} is damaged (see DAMAGE above)" if not json_output
                   else f"kafkapy: {name} is damaged", err=True)
    return 1 if damaged else 0
