"""Source tables and helpers the join-derivation tests share (test_joins, test_join_batches,
test_join_roles)."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
from deltalake import write_deltalake

from optimizer.joins import JoinDeriver
from querylog.predicates.attribute import JoinKey
from querylog.records import DerivedFilter

TS = datetime(2024, 1, 1, tzinfo=UTC)


def _date_dim(path, rng, shuffled=True):  # type: ignore[no-untyped-def]
    """Keys 1..240, twelve months per year over 2000-2019, in a shuffled key order unless not `shuffled`."""
    keys = list(range(1, 241))
    if shuffled:
        rng.shuffle(keys)
    rows = [(k, 2000 + i // 12, i % 12 + 1) for i, k in enumerate(keys)]
    write_deltalake(
        str(path),
        pa.table(
            {
                "d_date_sk": pa.array([r[0] for r in rows], pa.int64()),
                "d_year": pa.array([r[1] for r in rows], pa.int32()),
                "d_moy": pa.array([r[2] for r in rows], pa.int32()),
            }
        ),
    )
    return rows


def _write(path, columns: dict[str, pa.Array]) -> None:  # type: ignore[no-untyped-def]
    write_deltalake(str(path), pa.table(columns))


def _snowflake(path):  # type: ignore[no-untyped-def]
    """nation and supplier tables: 30 suppliers spread over three nations."""
    nations = {0: "FRANCE", 1: "GERMANY", 2: "PERU"}
    suppliers = {s: (s * 7) % 3 for s in range(1, 31)}
    write_deltalake(
        str(path / "nation"),
        pa.table({"n_nationkey": pa.array(list(nations), pa.int64()), "n_name": list(nations.values())}),
    )
    write_deltalake(
        str(path / "supplier"),
        pa.table(
            {
                "s_suppkey": pa.array(list(suppliers), pa.int64()),
                "s_nationkey": pa.array(list(suppliers.values()), pa.int64()),
            }
        ),
    )
    return nations, suppliers


def _batched(deriver: JoinDeriver, keys: list[JoinKey]) -> list[tuple[DerivedFilter, ...]]:
    with deriver.batch():
        for key in keys:
            deriver(key)
    return [deriver(key) for key in keys]


def _refusals(caplog) -> list[str]:  # type: ignore[no-untyped-def]
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("cannot derive from")]
