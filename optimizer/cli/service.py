"""The ``deltaopt`` sub-commands of the service: estimate, serve, status and decisions."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from optimizer.cli.common import print_json, watched

if TYPE_CHECKING:
    from costmodel.benefit import BenefitEstimate
    from optimizer.analysis.search import SearchResult
    from optimizer.estimate.record import Decision


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
    from optimizer.service.status import table_status

    config = load_resolved(args.config)
    store = StateStore(config.service.state_dir)
    statuses = [table_status(table, store.load(table.name)) for table in config.tables]
    if args.json:
        print_json([status.as_dict() for status in statuses])
        return 0
    for status in statuses:
        print("\n".join(status.describe()))
    return 0


def _fleet_status(args: argparse.Namespace) -> int:
    """No table is opened: the state files and the fleet file say it all."""
    from optimizer.config import load_config
    from optimizer.service.status import fleet_status

    config = load_config(args.config)
    status = fleet_status(config.service.state_dir, config.service.fleet_path)
    if args.json:
        print_json(status.as_dict())
    else:
        print("\n".join(status.describe()))
    return 0


def cmd_decisions(args: argparse.Namespace) -> int:
    from optimizer.config import load_config
    from optimizer.service.decisions import DecisionLog
    from optimizer.service.logged import LoggedDecision

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
        if r.features is not None:
            print(f"    {r.features.line()}")
        if r.realised is not None:
            print(f"    {r.realised.line()}")
        if r.liquid is not None:
            print(f"    {r.liquid.line()}")
    print(f"{len(records)} decision(s)")
    return 0
