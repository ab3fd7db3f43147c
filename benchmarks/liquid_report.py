"""The liquid benchmark's report (`benchmarks.liquid_bench` runs it): per tick and in total, bytes per
held-out query for standard readers, cluster-seconds spent rewriting, the service's key changes, its
estimate of Delta's clustering against what the OPTIMIZE realised, and the issue's done-when checks as
measured (met / not met / not shown, with the figures). Works on the run's raw dict only, so a saved
raw JSON renders the same report."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import mean
from typing import Any

from benchmarks.common import table
from benchmarks.liquid_checks import (
    COPIES,
    checks,
    key_changes,
    recorded_realised,
    rewrite_seconds,
    service_jobs,
    totals,
)
from costmodel.benefit import MB

LABELS = {
    "expert": "(a) liquid, expert keys, OPTIMIZE after each append",
    "service": "(b) liquid under the service (liquid: set)",
    "deltaopt": "(c) deltaopt's layout, plain copy",
}


# ---- rendering --------------------------------------------------------------------------------------


def render(result: dict[str, Any]) -> str:
    """The whole report, from the run's raw dict."""
    ticks = result["ticks"]
    if not ticks:
        return _header(result) + "\nNo tick ran.\n"
    parts = [
        _header(result),
        "## Done-when checks (issue 47), as measured\n",
        table(("check", "status", "figures"), checks(result)),
        "\n## Per tick: held-out queries of the current phase\n",
        "MB per query: compressed bytes of the columns read with Delta min/max file skipping, and the file bytes "
        "Spark's own Delta scan read (files: per query, Spark). Rewrite s: (a)'s OPTIMIZE, the services' "
        "committed jobs.\n",
        table(_tick_headers(), [_tick_row(t) for t in ticks]),
        "\n## Totals (means of the per-tick figures; seconds and MB summed)\n",
        _totals_table(ticks),
        "\n## Key changes of (b)\n",
        _changes_table(ticks),
        "\n## (b): the estimate of Delta's clustering against what its OPTIMIZE realised\n",
        _estimate_table(ticks),
        _recorded_section(ticks),
        "\n## (b)'s decisions, tick by tick\n",
        table(("tick", "phase", "operation", "keys", "wanted (ticks)", "reason"), [_reason_row(t) for t in ticks]),
    ]
    return "\n".join(parts) + "\n"


def _header(result: dict[str, Any]) -> str:
    args, settings = result["args"], result["settings"]
    phases = {name: sum(1 for t in result["ticks"] if t["phase"] == name) for name in ("initial", "shift", "stable")}
    loads = [t["load"] for t in result["ticks"]] or [0.0]
    return (
        f"TPC-H lineitem scale {args['scale']}, sorted by l_shipdate and appended in batches of "
        f"{result['increment'] / MB:.2f} MB ({args['files_per_append']} files each), one per simulated hour, "
        f"{args['rate']:g} queries per hour recorded live; {args['held_out']} held-out queries per phase"
        + (f" ({args['judged']} more judge (b)'s jobs)" if "judged" in args else "")
        + ". Ticks run: "
        f"{phases['initial']} initial, {phases['shift']} after the shift, {phases['stable']} stable (asked: "
        f"{args['initial']} / {args['shift']} / {args['stable']}). File size {result['target'] / MB:.2f} MB "
        f"(the session's Delta maxFileSize and deltaopt's target alike). Workload window 12 h, half-life 2 h "
        f"(hours stand for days).\n\n"
        f"* {LABELS['expert']}: keys ({', '.join(result['expert_keys'])}), the first stream's most filtered columns, "
        f"kept after the shift;\n"
        f"* {LABELS['service']}: created CLUSTER BY ({args['initial_key']}), a column no stream filters; "
        f"liquid_key_ticks {settings['liquid_key_ticks']}, liquid_key_margin {settings['liquid_key_margin']}, "
        f"readers {settings['readers']}, cost_per_mb_read {settings['cost_per_mb_read']};\n"
        f"* {LABELS['deltaopt']}: the service's own layouts.\n\n"
        f"Machine load (1-minute load average at each tick's end, 2 cores, shared): min {min(loads):.1f}, mean "
        f"{mean(loads):.1f}, max {max(loads):.1f}. Run time {result.get('seconds', 0):.0f} s.\n"
    )


def _tick_headers() -> tuple[str, ...]:
    return (
        "tick",
        "phase",
        "min/max MB/q (a)",
        "(b)",
        "(c)",
        "Spark MB/q (a)",
        "(b)",
        "(c)",
        "Spark files/q (a, b, c)",
        "rewrite s (a)",
        "(b)",
        "(c)",
        "(b) did",
        "(b) keys after",
        "(c) did",
    )


def _tick_row(t: dict[str, Any]) -> tuple[object, ...]:
    scans = t["scans"]
    service = t["service"]
    did = service["liquid"].get("operation") or service["action"]
    if service["liquid"].get("full"):
        did += " FULL"
    return (
        t["step"],
        t["phase"],
        *(f"{scans[c]['standard_column_mb']:.3f}" for c in COPIES),
        *(f"{scans[c]['mb']:.2f}" for c in COPIES),
        ", ".join(f"{scans[c]['files']:.1f}/{scans[c]['total_files']}" for c in COPIES),
        *(f"{rewrite_seconds(t, c):.1f}" for c in COPIES),
        did if service["committed"] or service["action"] != "optimize" else f"{did} (not committed)",
        ", ".join(service["keys_after"]),
        t["deltaopt"]["action"],
    )


def _totals_table(ticks: Sequence[dict[str, Any]]) -> str:
    rows = []
    for phase in ("initial", "shift", "stable", "all"):
        chosen = [t for t in ticks if phase in ("all", t["phase"])]
        if not chosen:
            continue
        for copy, figures in totals(chosen).items():
            rows.append(
                (
                    f"{phase} ({len(chosen)})",
                    LABELS[copy],
                    f"{figures['minmax_mb']:.3f}",
                    f"{figures['spark_mb']:.2f}",
                    f"{figures['spark_files']:.1f}",
                    f"{figures['seconds']:.1f}",
                    f"{figures['rewrites']:.0f}",
                    f"{figures['written_mb']:.1f}",
                    f"{figures['deciding']:.1f}" if copy != "expert" else "-",
                )
            )
    headers = ("phase (ticks)", "copy", "min/max MB/q", "Spark MB/q", "Spark files/q", "rewrite s", "rewrites")
    return table((*headers, "MB written", "service's deciding s (not in the checks)"), rows)


def _changes_table(ticks: Sequence[dict[str, Any]]) -> str:
    changes = key_changes(ticks)
    if not changes:
        return "None: (b) kept its keys throughout (its reasons are below).\n"
    rows = [
        (
            c["step"],
            c["phase"],
            f"({', '.join(c['old'])}) -> ({', '.join(c['new'])})",
            "yes" if c["full"] else "no",
            c["reason"],
        )
        for c in changes
    ]
    return table(("tick", "phase", "old -> new keys", "FULL", "the record's reason"), rows)


def _estimate_table(ticks: Sequence[dict[str, Any]]) -> str:
    jobs = service_jobs(ticks)
    if not jobs:
        return "(b) committed no OPTIMIZE.\n"
    rows = [
        (
            j["step"],
            j["phase"],
            j["operation"],
            "-" if j["estimated"] is None else f"{j['estimated'] / MB:.3f}",
            f"{j['before'] / MB:.3f} -> {j['after'] / MB:.3f}",
            f"{j['realised'] / MB:.3f}",
            "-" if j["ratio"] is None else f"{j['ratio']:.2f}",
            f"{j['seconds']:.1f}",
            f"x{j['stored_estimated']:.2f}" if j["stored_estimated"] is not None else "-",
            f"x{j['stored_measured']:.2f}" if j["stored_measured"] is not None else "-",
        )
        for j in jobs
    ]
    headers = ("tick", "phase", "operation", "est. saved MB/q", "held-out MB/q before -> after", "realised saved MB/q")
    note = (
        "\nEstimated: the record's bytes per query before minus after (its workload window, the files Delta "
        "rewrites, Delta min/max reader). Realised: the phase's held-out queries that judge (b)'s jobs, on (b) "
        "right before and right after the tick, Delta min/max column bytes over the whole table (files the "
        "OPTIMIZE left alone read the same on both sides).\n"
    )
    stored = ("stored bytes: estimated", "Delta's OPTIMIZE: bytes out / in")
    return table((*headers, "est. / realised", "job s", *stored), rows) + "\n" + note


def _recorded_section(ticks: Sequence[dict[str, Any]]) -> str:
    recorded = recorded_realised(ticks)
    if not recorded:
        return "The service's own realised figures (`service.realised`): none recorded for (b) in this run.\n"
    rows = [
        (
            run_id[:8],
            f["version"],
            f["scans"],
            f"{f['bytes_saved'] / MB:.2f}",
            f"{f['benefit']:.1f}",
            "-" if f.get("estimated_for_scans") is None else f"{f['estimated_for_scans']:.1f}",
            "-" if f.get("ratio") is None else f"{f['ratio']:.2f}",
            f.get("superseded") or "-",
        )
        for run_id, f in recorded.items()
    ]
    headers = ("run", "version", "scans", "MB saved", "realised cluster-s", "estimated for those scans", "ratio")
    sums = (ticks[-1]["service"].get("measured") or {}).get("totals")
    summed = f"\nThe table's totals at the end (`deltaopt status`): {sums}\n" if sums else ""
    return (
        "\nThe service's own realised figures for (b)'s jobs (`service.realised`: the scans it logged after each "
        "job, whole files priced by the log's statistics), latest per run:\n\n"
        + table((*headers, "superseded"), rows)
        + "\n"
        + summed
    )


def _reason_row(t: dict[str, Any]) -> tuple[object, ...]:
    liquid = t["service"]["liquid"]
    reason = t["service"]["reason"]
    return (
        t["step"],
        t["phase"],
        liquid.get("operation") or t["service"]["action"],
        ", ".join(liquid.get("keys") or []),
        f"{', '.join(liquid.get('wanted') or [])} ({liquid.get('wanted_ticks', 0)})",
        reason if len(reason) <= 400 else reason[:400] + " ...",
    )
