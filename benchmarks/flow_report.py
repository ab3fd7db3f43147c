"""The flow benchmark's report (`benchmarks.flow_bench` runs it): per scenario, the service's decision and
estimate per tick beside the manual run's measured job and saving, the held-out queries' bytes and files
per copy, DuckDB's files, the race against Delta's own layouts, and the verdict; and the raw figures as JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import kept_share
from benchmarks.common import table
from benchmarks.flow_model import HELD_OUT, Scenario, Tick
from costmodel.benefit import MB

DECISION_COLUMNS = (
    "tick",
    "service",
    "est. cost",
    "est. benefit",
    "skipping / compression",
    "projected queries (rate)",
    "est. bytes ratio",
    "MB/query after: est. / measured",
    "manual job s",
    "manual measured benefit",
    "manual pays off",
    "service: realised benefit / job s",
    "tick s",
)
COPIES = ("none", "manual", "service")
PEER_NAMES = {"zorder": "Delta ZORDER BY", "liquid": "Delta liquid clustering"}


def render(results: Sequence[dict], scale: float, appends: int) -> str:
    lines = [line for result in results for line in _scenario(result)]
    header = (
        f"TPC-H lineitem scale {scale} in {appends} increments; one increment per simulated hour, "
        f"{HELD_OUT} held-out queries per measurement.\n\n"
    )
    return header + "\n".join(lines)


def _scenario(result: dict) -> list[str]:
    """One scenario's section, as lines the report joins."""
    scenario: Scenario = result["scenario"]
    ticks: list[Tick] = result["ticks"]
    lines = [
        f"## {scenario.name}\n\n{scenario.rate:g} queries per simulated hour; expected: {scenario.expect}. "
        f"Increment {result['increment'] / 1e6:.1f} MB, target file size {result['target'] / 1e6:.2f} MB.\n",
        table(DECISION_COLUMNS, [_decision_row(t) for t in ticks]),
        _held_out(ticks),
    ]
    duck = result["duckdb"]
    lines.append(
        "\nDuckDB's Delta extension on the final tables, mean files scanned per held-out query: "
        + (_duckdb_files(duck["copies"]) if scenario.filtered else "n/a (no filters: every file is read)")
        + "\n"
    )
    if duck.get("errors"):
        lines.append(f"Unknown counts are the extension's errors: {duck['errors']}\n")
    if result.get("spark_scans"):
        lines.append(render_peers(result) + "\n")
        lines.append(kept_share.render(result["kept_over_bound"], PEER_NAMES) + "\n")
    lines.append(verdict(ticks) + "\n")
    return lines


def _decision_row(t: Tick) -> tuple[Any, ...]:
    """A tick's decision and estimate (the merged estimate where the job ran on one), beside the manual run."""
    merge = t.decision.get("merge") or {}
    d = merge["estimate"] if merge.get("taken") else t.decision  # the estimate the job ran on
    action = str(t.decision.get("action")) + (f" + {len(merge['runs'])} run(s)" if merge.get("taken") else "")
    b = d.get("benefit") or {}
    rate = b.get("rate") or {}
    compression = b.get("compression") or {}
    return (
        t.step,
        action,
        f"{(d.get('cost') or {}).get('seconds', 0):.1f}" if d.get("cost") else "-",
        f"{b.get('benefit', 0):.1f}" if b else "-",
        f"{b.get('benefit_skipping', 0):.1f} / {b.get('benefit_compression', 0):.1f}" if b else "-",
        f"{b.get('expected_queries', 0):,.0f} ({rate.get('per_day', 0) / 24:,.0f}/h)" if b else "-",
        f"{compression.get('ratio', 1):.2f}" if compression else "-",
        f"{t.estimated_after / MB:.2f} / {t.measured_after / MB:.2f}"
        if t.estimated_after is not None and t.measured_after
        else "-",
        f"{t.manual_seconds:.1f}" if t.manual_seconds is not None else "-",
        f"{t.manual_benefit:.1f}" if t.manual_benefit is not None else "-",
        {True: "yes", False: "no", None: "-"}[t.pays_off],
        f"{t.service_benefit:.1f} / {t.service_seconds:.1f}"
        if t.service_benefit is not None and t.service_seconds is not None
        else "-",
        f"{t.tick_seconds:.1f}",
    )


def _held_out(ticks: Sequence[Tick]) -> str:
    """Per tick, each copy's mean MB per held-out query (both readers) and the files deltaopt's pruning kept."""
    rows = [
        (
            t.step,
            *(f"{t.bytes_per_query[c] / MB:.2f}" for c in COPIES),
            *(f"{t.standard_bytes_per_query[c] / MB:.2f}" for c in COPIES),
            *(f"{t.files[c][0]:g}/{t.files[c][1]}" for c in COPIES),
        )
        for t in ticks
    ]
    columns = ("tick", *COPIES, *(f"std: {c}" for c in COPIES), *(f"files {c}" for c in COPIES))
    return (
        "\nHeld-out queries: mean MB read per query (deltaopt's pruning | standard reader) and files kept "
        "(deltaopt's pruning):\n\n" + table(columns, rows)
    )


def _duckdb_files(copies: dict[str, Any]) -> str:
    return ", ".join(
        f"{name} {v['mean_files']:.1f}/{v['total_files']}" + (f" ({v['unknown']} unknown)" if v["unknown"] else "")
        for name, v in copies.items()
        if v["mean_files"] is not None
    )


def render_peers(result: dict) -> str:
    """deltaopt's service against Delta's ZORDER BY and liquid clustering: rewrites, and what Spark's own
    Delta scan, deltaopt's pruning and DuckDB read on the final tables."""
    scans, duck = result["spark_scans"], result["duckdb"]["copies"]
    rewrites = _rewrites(result)
    rows = []
    for name, scan in scans.items():
        count, seconds, written, again = rewrites[name]
        d = duck.get(name) or {}
        rows.append(
            (
                name,
                count,
                f"{seconds:.1f}",
                "-" if written is None else f"{written / MB:.1f}",
                again,
                f"{scan['files']:.1f}/{scan['total_files']}",
                f"{scan['mb']:.2f}",
                f"{scan['deltaopt_column_mb']:.2f}",
                f"{scan['standard_column_mb']:.2f}",
                "-" if d.get("mean_files") is None else f"{d['mean_files']:.1f}/{d['total_files']}",
            )
        )
    names = {k: k for k in scans} | PEER_NAMES
    rows = [(names[r[0]], *r[1:]) for r in rows]
    columns = ", ".join(result.get("peer_columns", ()))
    return (
        "\nAgainst Delta's own layouts (same appends, same Spark session; peers written by Delta's writer):\n\n"
        + table(
            (
                "copy",
                "rewrites",
                "rewrite s (total)",
                "MB written",
                "rewrites that re-clustered old data",
                "Spark Delta scan: files/query",
                "Spark Delta scan: MB/query",
                "deltaopt pruning: column MB/query",
                "Delta min/max: column MB/query",
                "DuckDB files/query",
            ),
            rows,
        )
        + f"\n\nDelta's peers cluster on ({columns}): the columns the stream filters most. Rewrites that "
        "re-clustered old data: OPTIMIZE runs that removed more bytes than had arrived since the previous one.\n"
    )


def _rewrites(result: dict) -> dict[str, tuple[int, float, int | None, int]]:
    """Per copy: rewrites run, their seconds, bytes written (None: not measured) and how many re-clustered
    data that was already clustered."""
    ticks: list[Tick] = result["ticks"]
    service = [t for t in ticks if t.service_rewrite]
    rewrites: dict[str, tuple[int, float, int | None, int]] = {
        "none": (0, 0.0, 0, 0),
        "manual": (sum(1 for t in ticks if t.manual_seconds), sum(t.manual_seconds or 0 for t in ticks), None, 0),
        "service": (
            len(service),
            sum(t.service_seconds or 0 for t in service),
            sum(t.service_rewrite["bytes_out"] for t in service if t.service_rewrite),
            sum(1 for t in service if t.service_rewrite and t.service_rewrite["rewrote_clustered"]),
        ),
    }
    for name, runs in result["peers"].items():
        rewrites[name] = (
            len(runs),
            sum(r["seconds"] for r in runs),
            sum(r["bytes_added"] for r in runs),
            sum(1 for r in runs if r["rewrote_clustered"]),
        )
    return rewrites


def verdict(ticks: Sequence[Tick]) -> str:
    """Did the service optimise when optimising paid off, and skip when it did not? An optimise is
    judged by its own realised saving at the stream's true rate against its measured job time; a skip
    by what optimising that append would have realised (the manual copy's run)."""
    optimised = [t for t in ticks if t.decision.get("action") == "optimize"]
    skipped = [t for t in ticks if t.decision.get("action") == "skip"]
    paid = [t for t in optimised if _paid_off(t)]
    missed = [t for t in skipped if t.pays_off]
    errors = [t.estimated_after / t.measured_after for t in ticks if t.estimated_after is not None and t.measured_after]
    accuracy = f"; estimated/measured bytes per query after: {', '.join(f'{e:.2f}' for e in errors)}" if errors else ""
    return (
        f"Verdict: optimised on {len(optimised)} of {len(ticks)} ticks, {len(paid)} of which paid off as measured "
        f"(realised saving at the true rate over the horizon > the job's seconds); skipped {len(skipped)}, "
        f"{len(missed)} of which a manual optimise of that append would have paid off{accuracy}."
    )


def _paid_off(t: Tick) -> bool:
    """The service's job saved more at the true rate than it took (both measured)."""
    if t.service_benefit is None or t.service_seconds is None:
        return False
    return t.service_benefit > t.service_seconds


def save_raw(results: Sequence[dict], path: Path) -> None:
    raw = [
        {
            "scenario": r["scenario"].name,
            "ticks": [t.__dict__ | {"decision": _brief(t.decision)} for t in r["ticks"]],
            "peers": r.get("peers"),
            "spark_scans": r.get("spark_scans"),
            "kept_over_bound": {name: k.__dict__ for name, k in (r.get("kept_over_bound") or {}).items()},
            "granularity": r["granularity"].__dict__,
        }
        for r in results
    ]
    path.write_text(json.dumps(raw, indent=1, default=str))


def _brief(decision: dict[str, Any]) -> dict[str, Any]:
    keep = ("action", "reason", "new_bytes", "net", "cost", "benefit", "features", "layouts", "seconds")
    return {k: decision.get(k) for k in keep}
