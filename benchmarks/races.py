"""Concurrent Delta operations landed in the middle of a deltaopt layout rewrite, on every commit path.

    python -m benchmarks races [--full] [--ops DELETE,MERGE] [--paths delta-rs] [--control] [--report NAME]
                               [--layout combined|tree] [--before]

Each case copies a small base table made by delta-spark (600 rows: id, k, ts, ts_ntz, s, day, pt; row
tracking, partitioned by a date or by a timestamp, or liquid-clustered) twice. On one copy the concurrent
operation runs alone: the truth. On the other a real deltaopt OPTIMIZE (`optimizer.clustering.job.optimize`,
a combined SOP + Z-order layout, or with `--layout tree` the cut tree `race_cases.TREE`, file and row-group cuts as
the service chooses for range workloads) runs and the operation lands, once, at the path's injection point
(`--before` adds DELETE, UPDATE and MERGE committed before the rewrite opens the table, on every base table
of both rewriting paths: deletion vectors, row ids and partition values the rewrite must carry over):

* **delta-spark** (Delta's transaction through py4j) and **delta-rs** (`spark.commit: delta-rs`): right
  before the rewrite's first commit attempt, through the committer's ``before_commit`` (the job takes no
  hook, so the harness wraps the committer `rewrite_path.open_path` gives the job; `committer_for` in older trees);
* **delta-sql** (Delta's own OPTIMIZE on a liquid table, `optimizer.clustering.by_delta`): there is no
  point inside Delta's OPTIMIZE (it writes and commits within one statement), so the mid-commit race is
  not run; the operation lands at the one point deltaopt's own code has, after Delta's OPTIMIZE commits
  and before deltaopt finds the run's commit by its tag (`delta_sql_commit.run_commits`; `by_delta`'s in older
  trees; earlier, the version was read as the newest one, `DeltaSql.latest`).

Cases whose tables are partitioned by a timestamp run (the operation and the rewrite) in the session
time zone America/Los_Angeles, the others in UTC; every table is read in both (`benchmarks.race_checks`).
Outcomes: "committed, rows ok", "gave up cleanly" (`CommitConflictError`, no commit of the run), "FAIL:
<what>" (rows, row ids, rendered timestamps, history, files left behind, the reported version, a failure
before the commit), "not raced" (refused up front with `UnsupportedTableError`, or the operation refused),
and one documented outcome: row tracking enabled mid-rewrite lets the rewrite commit with new row ids,
tagged ``delta.rowTracking.preserved=false`` as Delta's own OPTIMIZE (docs/TABLE-FEATURES.md).
``--control`` runs the operation on both copies and no rewrite: every case must read "rows ok" (the
checks are sound and the operations deterministic).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from unittest import mock

from benchmarks import race_checks as rc
from benchmarks.common import table, write_report
from benchmarks.race_cases import LAYOUTS, PATHS, TARGET_FILE_SIZE, TREE_ROW_GROUP, Case, cases, committed_first
from optimizer import errors
from optimizer.table import open_table
from optimizer.table.delta_engine import java_message, session_conf
from optimizer.table.output import OutputSettings
from optimizer.table.rewrite import COMMIT_CONF

NOT_RACED = {
    "operation": "(every)",
    "path": "delta-sql, inside Delta's OPTIMIZE",
    "table": "liquid_rt",
    "layout": "Delta's",
    "lands": "mid-rewrite",
    "tz": "",
    "outcome": "not raced: no injection point",
    "detail": "Delta's OPTIMIZE writes and commits within one statement",
    "s": 0.0,
}


@dataclass
class Landing:
    """The concurrent operation, landed once when the injection point is first reached."""

    spark: Any
    operation: str
    path: str
    reached: bool = False
    error: str | None = None

    def __call__(self, _version: int = -1) -> None:
        if self.reached:
            return
        self.reached = True
        try:
            rc.apply(self.spark, self.operation, self.path)
        except Exception as err:  # reported as the case's failure, not raised into the rewrite
            self.error = _line(err)


class _Racing:
    """A committer whose every rewrite first lands the operation (`before_commit` of the real one)."""

    def __init__(self, inner: Any, landing: Landing) -> None:
        self._inner, self._landing = inner, landing

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def rewrite(self, request: Any, *, before_commit: Any = None) -> int:
        def land(version: int) -> None:
            self._landing(version)
            if before_commit is not None:
                before_commit(version)

        return int(self._inner.rewrite(request, before_commit=land))


@contextmanager
def injected(path: str, landing: Landing) -> Iterator[None]:
    """The operation lands at `path`'s injection point while the block runs."""
    import optimizer.clustering.by_delta as by_delta
    import optimizer.clustering.job as job
    from optimizer.table.delta_sql import DeltaSql

    if path == "delta-sql":  # where deltaopt learns what Delta's OPTIMIZE committed (older trees: `latest`)
        owner, name = _delta_sql_point(by_delta, DeltaSql)
        found = getattr(owner, name)

        def after_optimize(*args: Any) -> Any:
            landing()
            return found(*args)

        with mock.patch.object(owner, name, after_optimize):
            yield
        return
    if not hasattr(job, "open_path"):  # older trees: the job asked `committer_for`
        original = job.committer_for
        with mock.patch.object(job, "committer_for", lambda t, s: _Racing(original(t, s), landing)):
            yield
        return
    opened = job.open_path

    def racing(*args: Any, **kwargs: Any) -> Any:
        chosen = opened(*args, **kwargs)
        return chosen if chosen.path.by_delta else replace(chosen, committer=_Racing(chosen.committer, landing))

    with mock.patch.object(job, "open_path", racing):
        yield


def _delta_sql_point(by_delta: Any, delta_sql: Any) -> tuple[Any, str]:
    """Where deltaopt learns which commits Delta's OPTIMIZE made: `run_commits` as the Delta-command
    committer calls it (`optimizer.table.delta_sql_commit`), in older trees as `by_delta` imported it, or
    before that the newest version (`DeltaSql.latest`)."""
    try:
        import optimizer.table.delta_sql_commit as commit_module
    except ImportError:
        commit_module = None
    if commit_module is not None and hasattr(commit_module, "run_commits"):
        return commit_module, "run_commits"
    return (by_delta, "run_commits") if hasattr(by_delta, "run_commits") else (delta_sql, "latest")


@dataclass
class Attempt:
    """What the rewrite did: its run id, result or error, and whether the operation landed."""

    run_id: str
    landing: Landing
    result: Any = None
    error: BaseException | None = None
    seconds: dict[str, float] = field(default_factory=dict)


def race(spark: Any, case: Case, race_path: str) -> Attempt:
    """deltaopt's OPTIMIZE of `race_path` on `case.path` with the operation landing mid-run (or, for
    `lands="before"`, committed before the run opens the table)."""
    from optimizer.clustering.job import optimize

    attempt = Attempt(f"race-{uuid.uuid4().hex[:12]}", Landing(spark, case.operation, race_path))
    commit = "delta-rs" if case.path == "delta-rs" else "auto"
    if case.lands == "before":
        attempt.landing()
    with session_conf(spark, {COMMIT_CONF: commit}), injected(case.path, attempt.landing):
        try:
            table, features = open_table(race_path), LAYOUTS[case.layout]
            output = OutputSettings(row_group_bytes=TREE_ROW_GROUP) if features.cuts else OutputSettings()
            attempt.result = optimize(spark, table, features, TARGET_FILE_SIZE, run_id=attempt.run_id, output=output)
        except Exception as err:  # classified: a deltaopt error or a raw one
            attempt.error = err
    return attempt


def run_case(spark: Any, bases: rc.Bases, case: Case, work: Path, control: bool = False) -> dict[str, Any]:
    """One case: the truth, the race, the checks; a row of the report."""
    started = time.perf_counter()
    label = f"{len(list(work.iterdir())):03d}"
    race_path = bases.copy(case.shape, work / f"{label}-race")
    truth = bases.copy(case.shape, work / f"{label}-truth")
    start_version = open_table(race_path).snapshot().version
    with session_conf(spark, {rc.TZ_CONF: case.tz}):
        try:
            rc.apply(spark, case.operation, truth)
        except Exception as err:
            return _row(case, f"not raced: Delta refuses the operation alone: {_line(err)}", started)
        if control:
            attempt = Attempt("control", Landing(spark, case.operation, race_path))
            attempt.landing()
        else:
            attempt = race(spark, case, race_path)
    try:
        outcome, detail = classify(spark, case, (race_path, truth), start_version, attempt)
    except Exception as err:  # the harness's own failure: said as such, never taken for a verdict
        outcome, detail = f"HARNESS ERROR: {_line(err)}", ""
    return _row(case, outcome, started, detail)


def _row(case: Case, outcome: str, started: float, detail: str = "") -> dict[str, Any]:
    seconds = round(time.perf_counter() - started, 1)
    return {
        "operation": case.operation,
        "path": case.path,
        "table": case.shape,
        "layout": case.layout,
        "lands": case.lands,
        "tz": case.tz,
        "outcome": outcome,
        "detail": detail,
        "s": seconds,
    }


def _line(err: BaseException) -> str:
    """The error's class and the first line of its message (Java's own message for a py4j error)."""
    return f"{type(err).__name__}: {(java_message(err).splitlines() or [''])[0][:200]}"


def classify(spark: Any, case: Case, paths: tuple[str, str], start: int, attempt: Attempt) -> tuple[str, str]:
    """The case's outcome from the history, the files and the rows (`race_checks`), and a detail: the
    rewrite's error, or which version it committed after which operations."""
    error = _line(attempt.error).replace(paths[0], "<table>") if attempt.error else ""
    if not attempt.landing.reached:  # refused up front is an answer; any other failure before the commit is not
        if attempt.error is None or isinstance(attempt.error, errors.UnsupportedTableError):
            return "not raced: " + (error or "the run reached no commit"), ""
        return f"FAIL: the run failed before its commit ({error})", ""
    problems = history_problems(case, paths, start, attempt)
    truth = open_table(paths[1])
    tracked = truth.snapshot().features.row_tracking
    history = open_table(paths[0]).history(start + 1)
    others = [c for c in history if c.deltaopt.get("runId") != attempt.run_id]
    same_versions = [c.version for c in others][:1] == [c.version for c in truth.history(start + 1)][:1]
    expected = rc.read(spark, paths[1], tracked)
    try:
        actual = rc.read(spark, paths[0], tracked)
    except Exception as err:  # a file the log references is gone, or a column the truth has is not there
        problems.append(f"the raced table cannot be read: {_line(err)}")
    else:
        problems += rc.row_differences(spark, actual, expected, paths, same_versions)
    ours = rc.run_commits(history, attempt.run_id)
    detail = (error[:140] + "...") if len(error) > 140 else error or _committed(ours, others)
    if problems and _ids_reassigned_as_documented(case, problems, ours):
        return "committed, rows ok; row ids reassigned, tagged " + PRESERVED_TAG + "=false (documented)", detail
    if problems:
        return "FAIL: " + "; ".join(problems), detail
    if ours:
        return "committed, rows ok", detail
    if case.lands == "before":  # nothing raced it: giving up or committing nothing is a failure here
        return f"FAIL: nothing committed though nothing raced ({error or 'no error'})", detail
    if isinstance(attempt.error, errors.CommitConflictError):
        return "gave up cleanly", detail
    if attempt.error is not None:
        return f"gave up ({type(attempt.error).__name__}), rows ok", detail
    return ("rows ok" if attempt.run_id == "control" else "nothing committed, rows ok"), detail


PRESERVED_TAG = "delta.rowTracking.preserved"


def _ids_reassigned_as_documented(case: Case, problems: list[str], ours: list[Any]) -> bool:
    """Row tracking enabled while the rewrite ran: Delta's conflict checker lets the rewrite commit (as it
    lets its own OPTIMIZE) and tags it `delta.rowTracking.preserved` false, and the rewritten rows get new
    ids and row commit versions. docs/TABLE-FEATURES.md states exactly this outcome, so it is not a FAIL,
    but only when every problem is about row ids or versions and the run's one commit carries the tag."""
    about_ids = all(p.startswith(("row ids differ", "row commit versions differ")) for p in problems)
    if case.operation != "enable row tracking" or not about_ids or len(ours) != 1:
        return False
    tags = ours[0].metadata.get("tags")
    return isinstance(tags, dict) and str(tags.get(PRESERVED_TAG, "")).lower() == "false"


def _committed(ours: list[Any], others: list[Any]) -> str:
    """Where the run's commit sits among the others' (`v3 after DELETE v2`)."""
    if not ours:
        return ""
    before = ", ".join(f"{c.operation} v{c.version}" for c in others if c.version < ours[0].version) or "nothing"
    return f"the run's commit v{ours[0].version} after {before}"


def history_problems(case: Case, paths: tuple[str, str], start: int, attempt: Attempt) -> list[str]:
    """`race_checks.history_problems` of the attempt, and the operation failing mid-rewrite."""
    reported = getattr(attempt.result, "version", None)
    liquid = case.path == "delta-sql"
    problems = rc.history_problems(paths, start, attempt.run_id, reported, attempt.error, liquid)
    if attempt.landing.error:
        when = "before the rewrite" if case.lands == "before" else "mid-rewrite"
        problems.insert(0, f"the operation failed {when}: {attempt.landing.error}")
    return problems


def report(rows: list[dict[str, Any]], full: bool, control: bool) -> str:
    """The report's body: the outcome table, its legend and what each path's injection point is."""
    failed = sum(r["outcome"].startswith("FAIL") for r in rows)
    summary = f"{len(rows)} case(s), {failed} FAIL, {sum(r['s'] for r in rows):.0f} s in all"
    if any(r["path"] == "delta-sql" for r in rows):
        rows = [*rows, NOT_RACED]
    body = [
        summary + (" (control: no rewrite)" if control else "") + (" (every base table)" if full else ""),
        "",
        table(list(rows[0]), [list(r.values()) for r in rows]),
        "",
        __doc__.split("\n\n", 2)[2].strip() if __doc__ else "",
        "",
        "Tables (`benchmarks/race_checks.py`): `rt*` have row tracking (row ids and row commit versions are "
        "compared), `*_by_day` are partitioned by a date, `*_by_pt` by a timestamp, `liquid_rt` is clustered "
        "by (k, ts) after it was written; `plain*` have no table feature (the delta-rs path refuses row "
        "tracking up front).",
    ]
    return "\n".join(body)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks races")
    parser.add_argument("--full", action="store_true", help="every suitable base table per (operation, path)")
    parser.add_argument("--ops", default="", help="comma-separated operations (default: all)")
    parser.add_argument("--paths", default="", help=f"comma-separated commit paths of {', '.join(PATHS)}")
    parser.add_argument("--control", action="store_true", help="no rewrite: the operation on both copies")
    parser.add_argument("--layout", default="combined", choices=sorted(LAYOUTS), help="what the rewrite lays out")
    parser.add_argument(
        "--before", action="store_true", help="also DELETE/UPDATE/MERGE committed before the rewrite, every table"
    )
    parser.add_argument("--report", default="races")
    args = parser.parse_args(argv)
    from optimizer.config import SparkSettings
    from optimizer.runtime import build_session

    chosen = cases(args.full, _names(args.ops), _names(args.paths), args.layout)
    chosen += committed_first(args.layout) if args.before else []
    if not chosen:
        parser.error(f"no case: the {args.layout} layout is not run on {args.paths or 'these paths'}")
    spark = build_session(SparkSettings(master="local[2]", shuffle_partitions=2, app_name="deltaopt-races"))
    rows = run_all(spark, chosen, control=args.control)
    command = "python -m benchmarks races " + " ".join(argv)
    write_report(
        args.report,
        "Concurrent Delta operations raced against a layout rewrite",
        report(rows, args.full, args.control),
        command.strip(),
    )


def _names(text: str) -> list[str] | None:
    return [n.strip() for n in text.split(",") if n.strip()] or None


def run_all(spark: Any, chosen: list[Case], control: bool = False) -> list[dict[str, Any]]:
    """Every case in one session, tables under a temporary directory (removed after); rows printed as
    they end."""
    import optimizer.clustering.job  # noqa: F401  (a tree that does not import fails here, before any table is made)

    rc.prepare_sources(spark)
    work = Path(tempfile.mkdtemp(prefix="deltaopt-races-"))
    try:
        bases, runs = rc.Bases(spark, work / "bases"), work / "runs"
        runs.mkdir()
        rows = []
        for case in chosen:
            rows.append(run_case(spark, bases, case, runs, control))
            print(" | ".join(str(v) for v in rows[-1].values()), flush=True)
        return rows
    finally:
        shutil.rmtree(work, ignore_errors=True)
