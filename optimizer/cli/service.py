"""The ``deltaopt`` sub-commands of the service: estimate, serve, status and decisions."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from optimizer.cli.common import print_json, watched
from optimizer.errors import DeltaOptError

if TYPE_CHECKING:
    from costmodel.benefit import BenefitEstimate
    from optimizer.analysis.search import SearchResult
    from optimizer.config import TableSettings
    from optimizer.estimate.record import Decision
    from optimizer.service.state import TableState


def cmd_estimate(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime
    from functools import cache

    from costmodel.cost import load
    from optimizer.analysis import TableContext
    from optimizer.catalog import table_locations
    from optimizer.service.jobs import estimate_as_run, history_start
    from optimizer.service.remote import chosen_executor
    from optimizer.service.state import StateStore
    from optimizer.skipping.extended import load_index

    config, table, spark, delta, log = watched(args)
    cost_model = load(config.service.cost_model_path)
    locations = table_locations(config)
    now = datetime.now(UTC)
    # the table's realised / estimated factor, as the service's tick weighs it (the output names it)
    state = StateStore(config.service.state_dir).load(table.name)
    realised = state.realised
    calibration = realised.calibration(table.thresholds.realised_min_jobs, table.thresholds.realised_half_life)
    thresholds = table.thresholds
    context = TableContext(
        spark, delta, table.identity, log, thresholds, now, cost_model, locations, calibration=calibration
    )
    snapshot = delta.snapshot()
    # as the service's tick prices it: Delta's ZORDER BY where only SQL reaches the job's cluster
    job = cache(
        lambda: chosen_executor(config.execution, delta.history(history_start(state, snapshot)), spark, config.spark)
    )
    decision = estimate_as_run(context, snapshot, load_index(delta, snapshot), job)
    if args.json:
        print_json(decision.as_dict())
        return 0
    _print_decision(table.name, decision)
    return 0


def _print_decision(name: str, decision: Decision) -> None:
    """The estimate for an operator: the verdict and its reason, the new data, and the figures behind it."""
    print(f"{name} v{decision.version}: {decision.action.upper()} - {decision.reason}")
    print(
        f"  new data: {decision.new_files} files, {decision.new_bytes:,} bytes (threshold {decision.min_new_bytes:,})"
    )
    older = decision.outside_window
    if older is not None and older.count:
        first, last = older.period()
        print(f"  outside the workload window: {older.count} logged scans ({first} .. {last})")
    if decision.cost and decision.benefit:
        print(f"  cost: {decision.cost.seconds:.1f} cluster-s ({decision.cost.terms})")
        _print_benefit(decision.benefit)
        print(f"  features: {decision.features.as_dict() if decision.features is not None else {}}")
    if decision.search is not None:
        _print_search(decision.search)


def _print_benefit(b: BenefitEstimate) -> None:
    """The benefit's figures: queries, bytes saved, the query rate, stored bytes, each kind of reader;
    the estimate's own figure first (what its parts add up to), then the calibrated one it was weighed at."""
    print(
        f"  benefit: {b.raw_benefit:.1f} cluster-s = {b.expected_queries:.0f} expected queries x "
        f"{b.saved_mb_per_query:.2f} MB saved each; scanned share {b.p_before:.1%} -> {b.p_after:.1%}"
    )
    print(f"    of which skipping {b.benefit_skipping:.1f}, compression {b.benefit_compression:.1f}")
    if b.calibration is not None:
        print(
            f"  calibrated: {b.benefit:.1f} cluster-s (x{b.calibration.factor:.2f}, this table's realised/estimated "
            f"over {b.calibration.jobs} jobs): the figure weighed against the cost"
        )
    if b.rate is not None and b.rate.period_start is not None:
        print(
            f"  query rate: {b.rate.per_day:,.1f}/day over {b.rate.covered_seconds / 3600:,.1f} h of log "
            f"from {b.rate.period_start:%Y-%m-%d %H:%M} ({len(b.rate.gaps)} gap(s) left out)"
        )
    if b.compression is not None:
        c = b.compression
        print(
            f"  stored bytes x{c.ratio:.3f} ({c.codec_before} -> {c.codec_after}): compaction "
            f"x{round(c.compaction_ratio, 4)}, clustering x{round(c.clustering_ratio, 4)}"
        )
    for name, seen in b.readers.items():
        print(
            f"  {name} readers ({seen['share']:.0%} of reads): {seen['bytes_per_query_before'] / 1e6:.2f} -> "
            f"{seen['bytes_per_query_after'] / 1e6:.2f} MB per query, benefit {seen['benefit']:.1f}"
        )


def _print_search(search: SearchResult) -> None:
    """The feature search: what it cost, what it chose, why it stopped, and each candidate's fate."""
    print(
        f"  feature search: {search.estimates} estimates in {round(search.seconds, 3)} s; "
        f"chosen {search.chosen_names}; {search.stopped}"
    )
    for outcome in search.outcomes:
        print(f"    {outcome.candidate.kind} {outcome.candidate.feature}: {outcome.reason}")


def cmd_serve(args: argparse.Namespace) -> int:
    from optimizer.config import load_config
    from optimizer.logs import configure_logging
    from optimizer.service.service import context, run_once, serve

    config = load_config(args.config)
    if args.dry_run:
        config = config.model_copy(update={"service": config.service.model_copy(update={"dry_run": True})})
    configure_logging(config.logging.level, config.logging.format)
    ctx = context(config)
    if args.once:
        for record in run_once(ctx):
            print(f"{record.table}: {record.action.upper()} - {record.reason}")
    else:
        serve(ctx)
    print(f"decision log: {config.decision_log_path} (table: {config.service.decisions_path})")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """Per table (opening each), or with ``--fleet`` the whole fleet from the service's state."""
    return _fleet_status(args) if args.fleet else _tables_status(args)


def _tables_status(args: argparse.Namespace) -> int:
    from optimizer.cli.common import load_resolved
    from optimizer.service.state import StateStore

    config = load_resolved(args.config)
    store = StateStore(config.service.state_dir)
    rows = [_table_status(table, store.load(table.name)) for table in config.tables]
    if args.json:
        print_json(rows)
        return 0
    for entry in rows:
        _print_table_status(entry)
    return 0


def _table_status(table: TableSettings, state: TableState) -> dict[str, Any]:
    """One table's status: what the service's state says, and its files as the log has them now (or
    the one line saying why the table cannot be read)."""
    from optimizer.clustering.groups import clustered_groups
    from optimizer.inspect import table_info
    from optimizer.table import open_table

    entry: dict[str, Any] = {
        "table": table.name,
        "paused": table.paused,
        "last_decision": state.last_decision,
        "ticks": state.ticks,
        "last_optimized_version": state.last_optimized_version,
        "realised": _realised(table, state),
    }
    try:
        delta = open_table(table.path)
        info = table_info(delta)
        entry.update(
            version=info.version,
            files=info.files,
            bytes=info.bytes,
            clustered_bytes=info.clustered_bytes,
            unclustered_bytes=info.unclustered_bytes,
            layouts=[
                {**g.as_dict(), "current": g.key == state.current_layout}
                for g in clustered_groups(delta, delta.snapshot())
            ],
        )
    except DeltaOptError as err:
        entry["error"] = str(err)
    return entry


def _print_table_status(entry: Mapping[str, Any]) -> None:
    """A table's status for an operator: files, clustered and unclustered bytes, layouts, last decision,
    what its jobs realised."""
    from optimizer.inspect import human_bytes
    from optimizer.service.realised import realised_line

    decision = entry["last_decision"] or {}
    print(f"{entry['table']}{' [paused]' if entry['paused'] else ''}")
    if "error" in entry:
        print(f"  error: {entry['error']}")
    else:
        print(
            f"  version {entry['version']}, {entry['files']} files, {human_bytes(entry['bytes'])}; clustered "
            f"{human_bytes(entry['clustered_bytes'])}, unclustered {human_bytes(entry['unclustered_bytes'])}"
        )
        for layout in entry["layouts"]:
            which = "current features" if layout["current"] else "older features"
            print(
                f"    {which}: {layout['files']} files, {human_bytes(layout['bytes'])} clustered on "
                f"{layout['features']}"
            )
    print(
        f"  last decision: {decision.get('ts', 'never')} {str(decision.get('action', '')).upper()} "
        f"{decision.get('reason', '')}"
    )
    print(f"  {realised_line(entry['realised'])}")


def _realised(table: TableSettings, state: TableState) -> dict[str, Any]:
    """What the table's jobs realised so far (`service.realised`): the totals, the factor its next benefit
    estimates are scaled by (None: none yet), and the jobs still measured."""
    from optimizer.service.realised import figures, totals_dict

    thresholds = table.thresholds
    calibration = state.realised.calibration(thresholds.realised_min_jobs, thresholds.realised_half_life)
    return {
        **totals_dict(state.realised),
        "factor": calibration.factor if calibration is not None else None,
        "measuring": [figures(job, thresholds) for job in state.measured],
    }


def _realised_figures(realised: Mapping[str, Any]) -> str:
    """A job's realised figures so far, for `deltaopt decisions`."""
    estimated = realised.get("estimated_for_scans")
    against = f" (estimate for those scans {estimated:,.1f})" if estimated is not None else ""
    superseded = f"; {realised['superseded']}" if realised.get("superseded") else ""
    return (
        f"realised: {realised['benefit']:,.1f} cluster-s, {realised['bytes_saved']:,.0f} bytes saved over "
        f"{realised['scans']} scan(s){against}, {realised['unevaluable']} unevaluable{superseded}"
    )


def _liquid_line(liquid: Mapping[str, Any]) -> str:
    """A liquid table's tick for `deltaopt decisions`, named as Databricks' history names the operation."""
    keys = ", ".join(liquid.get("keys") or ()) or "none"
    wanted = ", ".join(liquid.get("wanted") or ()) or "none"
    operation = liquid.get("operation") or "no operation"
    full = " FULL" if liquid.get("full") else ""
    return f"liquid ({liquid.get('mode')}): {operation}{full}; keys ({keys}), the workload wants ({wanted})"


def _fleet_status(args: argparse.Namespace) -> int:
    """No table is opened: the state files and the fleet file say it all."""
    from optimizer.config import load_config
    from optimizer.service.status import describe, fleet_status

    config = load_config(args.config)
    status = fleet_status(config.service.state_dir, config.service.fleet_path)
    if args.json:
        print_json(status)
    else:
        print("\n".join(describe(status)))
    return 0


def cmd_decisions(args: argparse.Namespace) -> int:
    from optimizer.config import load_config
    from optimizer.service.decisions import DecisionLog, LoggedDecision

    config = load_config(args.config)
    records = DecisionLog(config.decision_log_path, config.service.decisions_path).read(args.table, args.last)
    if args.json:
        print_json(records)
        return 0
    for r in map(LoggedDecision.from_dict, records):
        print(f"{r.ts}  {r.table}  v{r.version}  {r.action.upper()}: {r.reason}")
        job = r.job
        if job is not None:
            print(
                f"    job on {job.executor} ({job.where}): {job.files_in} -> {job.files_out} files, "
                f"{job.bytes_in:,} -> {job.bytes_out:,} bytes, {job.seconds}s"
                f"{', error: ' + job.error if job.error else ''}"
            )
        if r.features:
            print(f"    features: z={r.features.get('z')} sop={r.features.get('sop')}")
        if r.realised:
            print(f"    {_realised_figures(r.realised)}")
        if r.liquid:
            print(f"    {_liquid_line(r.liquid)}")
    print(f"{len(records)} decision(s)")
    return 0
