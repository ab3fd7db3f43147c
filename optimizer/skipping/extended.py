"""Extended file statistics (thesis Figure 4.3) and the index that makes them readable.

Per file written by an OPTIMIZE run: min/max of every Z feature and additional Z expression that is
not a plain column, the SOP bit vector over the clustering and additional SOP features, with the
feature list it refers to, and the exact set of values of each key column (a column that key-list
features test: join keys, `collect.listed_columns`) when the file holds at most `MAX_KEY_SET` of them.
A key set answers any later list of keys (a dimension filter evaluated at query time, whatever the
dimension became): a file none of whose values is listed holds no matching row. Files of a layout with
joined features also keep, per dimension, the min/max of the joined attributes over the dimension rows
their fact rows join, with the dimension's version (`JoinedRanges`): a summary whose size does not
grow with the keys, valid only while the dimension stays at that version (`skipping.joined`).

Where they live (docs/ARCHITECTURE.md, contract 2):

* inside the add action's stats JSON under ``"deltaopt"``, so they travel atomically with the commit
  (delta-rs and checkpoints keep unknown keys verbatim), and
  (key sets, the bulky part, only in the sidecar: the Delta log is read by every engine), and
* in a sidecar index ``<table>/_deltaopt/stats/<run-id>.json`` written *before* the commit, because
  no delta-rs API returns the raw stats JSON. An index entry is used only while its path is active in
  the snapshot being read **and** its size equals the add action's size: data files are immutable and
  their names unique, so such an entry describes exactly that file. Anything else (no entry, a stale
  or unreadable index file) means "no extended statistics": the file is read.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow.fs as pafs

if TYPE_CHECKING:
    from optimizer.table.access import DataFile, Snapshot, TableAccess

log = logging.getLogger(__name__)

INDEX_DIR = "_deltaopt/stats"
FORMAT_VERSION = 1
STRING_PREFIX = 32
MAX_KEY_SET = 4096  # distinct values of a key column kept per file; more: no key set (the file is read)
PRUNE_AFTER = dt.timedelta(days=1)  # a sidecar describing no active file is deleted once this old
MAX_KEY_CHARS = 256  # a string key longer than this cannot be kept exactly cheaply: no key set
KEY_TYPES = ("tinyint", "smallint", "int", "bigint", "string", "date")


@dataclass(frozen=True)
class ValueRange:
    """Bounds of a feature's values in one file; None means unbounded on that side."""

    type_name: str  # Spark simpleString of the feature's result type
    min: Any
    max: Any
    null_count: int | None = None


@dataclass(frozen=True)
class JoinedRanges:
    """Bounds of dimension attributes over the dimension rows that a file's fact rows join
    (``fact_column = key``, inner), the dimension read at `version`. Sound for a query's filter on the
    dimension only while the dimension is at that version: any commit may reassign attributes."""

    fact_column: str  # lower-cased
    location: str  # the dimension table's URI, as `location_key` normalises it
    key: str  # lower-cased dimension key column
    version: int
    ranges: Mapping[str, ValueRange]  # lower-cased attribute -> its range (NULL count: joined rows)

    @property
    def join(self) -> tuple[str, str, str]:
        return self.fact_column, location_key(self.location), self.key


def location_key(location: str) -> str:
    """A table location as recorded and compared: without a trailing slash or a ``file:`` scheme
    (``file:///wh/part/`` and Spark's ``file:/wh/part`` are ``/wh/part``)."""
    return re.sub(r"^file:(//)?(?=/)", "", location.rstrip("/"))


@dataclass(frozen=True)
class ExtendedStats:
    """Extended statistics of one data file."""

    run_id: str
    ranges: Mapping[str, ValueRange] = field(default_factory=dict)  # canonical expression SQL -> range
    sop_features: tuple[str, ...] = ()  # canonical predicate SQL, in bit order
    sop_bits: str = ""  # '1': some row satisfies the feature; '0': no row does
    float_max_includes_nan: bool = True  # our writer's float maxima account for NaN
    key_sets: Mapping[str, frozenset[Any]] = field(default_factory=dict)  # key column -> every non-NULL value
    joined: tuple[JoinedRanges, ...] = ()
    zone: str | None = None  # session zone `ranges` and the SOP bits were computed in (None: unknown)

    def sop_bit(self, predicate_sql: str) -> bool | None:
        try:
            return self.sop_bits[self.sop_features.index(predicate_sql)] == "1"
        except ValueError:
            return None


def encode_value(type_name: str, value: Any, is_max: bool) -> Any:
    """A JSON value for a bound, rounded outward so it stays a bound; None when no bound is sound."""
    if value is None:
        return None
    if type_name in ("float", "double"):
        return None if value != value or value in (float("inf"), float("-inf")) else float(value)
    if type_name.startswith("decimal"):
        return str(Decimal(value))
    if type_name in ("timestamp", "timestamp_ntz"):
        return int(value)  # epoch microseconds, exact
    if type_name == "date":
        return value.isoformat()
    if type_name == "string":
        if is_max:
            return value if len(value) < STRING_PREFIX else None
        return value[:STRING_PREFIX]
    if type_name == "boolean":
        return bool(value)
    if isinstance(value, int):
        return int(value)
    return None


def decode_value(type_name: str, value: Any) -> Any:
    if value is None:
        return None
    if type_name.startswith("decimal"):
        return Decimal(value)
    if type_name == "date":
        return dt.date.fromisoformat(value)
    if type_name == "timestamp":
        return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=int(value))
    if type_name == "timestamp_ntz":
        return dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=int(value))
    return value


def key_set(type_name: str, values: Any) -> frozenset[Any] | None:
    """The exact set of a file's non-NULL `values` of a key column as pruning compares them (ints,
    strings, dates); None when it cannot be kept (another type, too many values, a long string)."""
    if type_name not in KEY_TYPES or values is None or len(values) > MAX_KEY_SET:
        return None
    if type_name == "string" and any(len(v) > MAX_KEY_CHARS for v in values):
        return None
    return frozenset(v for v in values if v is not None)


def _encode_keys(type_name: str, values: frozenset[Any]) -> list[Any]:
    return sorted(v.isoformat() for v in values) if type_name == "date" else sorted(values)


def to_json(stats: ExtendedStats, key_types: Mapping[str, str] | None = None, sidecar: bool = False) -> dict[str, Any]:
    """The document of one file's statistics; with `key_types` ({key column: type}) its key sets too,
    and in the `sidecar` its joined ranges (the Delta log, read by every engine, keeps neither)."""
    document = {
        "v": FORMAT_VERSION,
        "run": stats.run_id,
        "ranges": {expr: _range_json(r) for expr, r in stats.ranges.items()},
        "sop": {"features": list(stats.sop_features), "bits": stats.sop_bits},
        "nanAwareMax": stats.float_max_includes_nan,
        **({"zone": stats.zone} if stats.zone is not None else {}),
    }
    if key_types:
        document["keys"] = {
            column: {"type": key_types[column], "values": _encode_keys(key_types[column], values)}
            for column, values in stats.key_sets.items()
        }
    if sidecar and stats.joined:
        document["joined"] = [
            {
                "fact": j.fact_column,
                "location": j.location,
                "key": j.key,
                "version": j.version,
                "ranges": {attribute: _range_json(r) for attribute, r in j.ranges.items()},
            }
            for j in stats.joined
        ]
    return document


def _range_json(value_range: ValueRange) -> dict[str, Any]:
    return {
        "type": value_range.type_name,
        "min": value_range.min,
        "max": value_range.max,
        "nulls": value_range.null_count,
    }


def _range(document: Mapping[str, Any]) -> ValueRange:
    type_name = document["type"]
    return ValueRange(
        type_name,
        decode_value(type_name, document.get("min")),
        decode_value(type_name, document.get("max")),
        document.get("nulls"),
    )


def _decode_joined(document: Mapping[str, Any]) -> tuple[JoinedRanges, ...]:
    found = []
    for entry in document.get("joined") or ():
        version = entry["version"]
        if not isinstance(version, int) or isinstance(version, bool):
            raise ValueError(f"joined ranges of {entry.get('location')!r} without an integer version")
        ranges = {str(a).lower(): _range(r) for a, r in entry["ranges"].items()}
        found.append(
            JoinedRanges(str(entry["fact"]).lower(), str(entry["location"]), str(entry["key"]).lower(), version, ranges)
        )
    return tuple(found)


def _decode_keys(document: Mapping[str, Any]) -> dict[str, frozenset[Any]]:
    found: dict[str, frozenset[Any]] = {}
    for column, entry in (document.get("keys") or {}).items():
        type_name, values = entry["type"], entry["values"]
        if type_name not in KEY_TYPES or not isinstance(values, list):
            raise ValueError(f"malformed key set of {column!r}")
        expected = str if type_name in ("string", "date") else int
        if not all(isinstance(v, expected) and not isinstance(v, bool) for v in values):
            raise ValueError(f"key set of {column!r} holds values that are not {type_name}")
        found[str(column)] = frozenset(decode_value(type_name, v) for v in values)
    return found


def from_json(document: Mapping[str, Any]) -> ExtendedStats:
    """Raises ValueError/KeyError/TypeError on a malformed document (callers treat it as absent)."""
    if document.get("v") != FORMAT_VERSION:
        raise ValueError(f"unsupported extended stats version {document.get('v')!r}")
    sop = document.get("sop") or {}
    features = tuple(str(f) for f in sop.get("features", ()))
    bits = str(sop.get("bits", ""))
    if len(bits) != len(features) or set(bits) - {"0", "1"}:
        raise ValueError("SOP bits do not match the feature list")
    ranges = {str(expr): _range(r) for expr, r in (document.get("ranges") or {}).items()}
    return ExtendedStats(
        run_id=str(document["run"]),
        ranges=ranges,
        sop_features=features,
        sop_bits=bits,
        float_max_includes_nan=bool(document.get("nanAwareMax", False)),
        key_sets=_decode_keys(document),
        joined=_decode_joined(document),
        zone=str(document["zone"]) if document.get("zone") is not None else None,
    )


def write_index(
    table: TableAccess,
    run_id: str,
    files: Mapping[str, tuple[int, ExtendedStats]],
    *,
    features: Mapping[str, Any] | None = None,
    key_types: Mapping[str, str] | None = None,
    columns: Mapping[str, str] | None = None,
) -> str:
    """Write the sidecar for one run (before its commit), with the feature set the run clustered on
    and the files' key sets (`key_types`: {key column: type}). Under column mapping, `columns` is the
    table's {logical name: physical name} as the run saw it: a later RENAME or DROP makes the names in
    these statistics mean other data, so reading checks it (`_read_index`). Returns the index file path."""
    fs, root = table.filesystem()
    directory = f"{root}/{INDEX_DIR}"
    fs.create_dir(directory, recursive=True)
    document = {
        "v": FORMAT_VERSION,
        "run": run_id,
        "features": dict(features or {}),
        **({"columns": dict(columns)} if columns else {}),
        "files": {
            path: {"size": size, "stats": to_json(stats, key_types, sidecar=True)}
            for path, (size, stats) in files.items()
        },
    }
    path = f"{directory}/{run_id}.json"
    with fs.open_output_stream(path) as out:
        out.write(json.dumps(document, separators=(",", ":")).encode())
    return path


def delete_index(table: TableAccess, run_id: str) -> None:
    fs, root = table.filesystem()
    try:
        fs.delete_file(f"{root}/{INDEX_DIR}/{run_id}.json")
    except (FileNotFoundError, OSError) as err:
        log.debug("no index to delete for run %s: %s", run_id, err)


def prune_index(
    table: TableAccess, snapshot: Snapshot, now: dt.datetime, older_than: dt.timedelta = PRUNE_AFTER
) -> list[str]:
    """Delete the sidecars that describe no file active in `snapshot` (the table's latest: every file
    of their run was rewritten or removed, or the run died) and were written more than `older_than`
    ago: a run still committing has a sidecar for files not yet active. A reader of an older snapshot
    (time travel) then reads those files instead of skipping them by extended statistics: nothing it
    needs is lost. Keeps every `load_index` from reading the sidecars of every run ever made."""
    fs, root = table.filesystem()
    active = {unquote(f.path) for f in snapshot.files}
    deleted = []
    for info in fs.get_file_info(pafs.FileSelector(f"{root}/{INDEX_DIR}", allow_not_found=True)):
        if info.type != pafs.FileType.File or not info.path.endswith(".json") or info.mtime is None:
            continue
        if info.mtime > now - older_than:
            continue
        try:
            with fs.open_input_stream(info.path) as stream:
                entries = json.loads(stream.read())["files"]
        except (OSError, ValueError, KeyError, TypeError):
            continue  # unreadable: `load_index` warns about it; leave it to an operator
        if any(written in active for written in entries):
            continue
        try:
            fs.delete_file(info.path)
        except OSError as err:
            log.warning("could not prune the extended-stats index %s: %s", info.path, err)
            continue
        deleted.append(info.path)
    return deleted


def unclustered_files(table: TableAccess, snapshot: Snapshot) -> list[DataFile]:
    """Active files no OPTIMIZE run of deltaopt wrote (no fresh extended statistics)."""
    clustered = load_index(table, snapshot)
    return [f for f in snapshot.files if f.path not in clustered]


def load_index(table: TableAccess, snapshot: Snapshot) -> dict[str, ExtendedStats]:
    """Extended statistics of the active files of `snapshot` that have fresh index entries."""
    return _read_index(table, snapshot)[0]


def load_index_with_runs(
    table: TableAccess, snapshot: Snapshot
) -> tuple[dict[str, ExtendedStats], dict[str, Mapping[str, Any]]]:
    """`load_index` and, per run id, the feature set the run clustered on (as `FeatureSet.as_dict`;
    absent for index files written before runs recorded it)."""
    return _read_index(table, snapshot)


def _read_index(
    table: TableAccess, snapshot: Snapshot
) -> tuple[dict[str, ExtendedStats], dict[str, Mapping[str, Any]]]:
    runs: dict[str, Mapping[str, Any]] = {}
    fs, root = table.filesystem()
    # index entries name files as written (decoded), the log URL-encodes them: match on the decoded path
    active = {unquote(f.path): (f.path, f.size) for f in snapshot.files}
    found: dict[str, ExtendedStats] = {}
    selector = pafs.FileSelector(f"{root}/{INDEX_DIR}", allow_not_found=True)
    for info in fs.get_file_info(selector):
        if info.type != pafs.FileType.File or not info.path.endswith(".json"):
            continue
        try:
            with fs.open_input_stream(info.path) as stream:
                document = json.loads(stream.read())
            entries = document["files"]
        except (OSError, ValueError, KeyError, TypeError) as err:
            log.warning("ignoring unreadable extended-stats index %s: %s", info.path, err)
            continue
        if isinstance(document.get("features"), Mapping) and document["features"]:
            runs[str(document.get("run"))] = document["features"]
        renamed = _names_moved(document.get("columns"), snapshot)
        for written, entry in entries.items():
            path, size = active.get(written, (None, None))
            if path is None or size != entry.get("size"):
                continue  # not active in this snapshot, or not the same file: stale
            try:
                stats = from_json(entry["stats"])
                # columns renamed or dropped since the run: its names now mean other data; the file stays
                # clustered by that run (not rewritten again for it) but its statistics skip nothing
                found[path] = ExtendedStats(stats.run_id) if renamed else stats
            except (ValueError, KeyError, TypeError) as err:
                log.warning("ignoring malformed extended stats of %s: %s", path, err)
    return found, runs


def _names_moved(recorded: Any, snapshot: Snapshot) -> bool:
    """Whether a logical name the run saw now maps to another physical column, or none (column mapping:
    RENAME, DROP). An index written before the table mapped names: a table upgraded to column mapping
    keeps physical names equal to the old logical ones, so its names hold while no column is renamed."""
    current = snapshot.features.physical_names
    if not isinstance(recorded, Mapping):
        return any(logical != physical for logical, physical in current.items())
    return any(current.get(str(logical)) != physical for logical, physical in recorded.items())
