"""Delta's SQL path records the run's own commit and files (issue 45: review of the other commit paths).

Delta's own OPTIMIZE (a liquid table here; the same code runs every SQL-only session's ZORDER BY) commits
inside one statement, so deltaopt learns afterwards which version it committed and which files that
version added. Each test makes liquid tables with delta-spark and lands another writer's commits in the
middle of a real run, through the one point deltaopt's code has (`DeltaSql._run`, `DeltaSql.optimize`,
`DeltaSql.clustering_columns`):

* an append right after Delta's OPTIMIZE commits: the version reported is still the run's commit, and
  the appended file is not recorded as clustered by the run (it stays new data, `unclustered_files`);
* another writer's OPTIMIZE and append between the run's planning snapshot and its OPTIMIZE: only the
  files the run's commit added are recorded, not the files other commits left since planning;
* two tables' jobs at once in one session (the fleet's worker pool): each commit carries its own run's
  tag, and the session's user metadata is left as it was;
* another table's property commit while a run's tag is the session's is not a deltaopt OPTIMIZE;
* a statement failing after Delta committed is settled from the log; a DESCRIBE failure is not "no keys";
  a nested key is recorded as its struct path; an OPTIMIZE committed in batches is recorded in full.

What the run committed is read back through Delta's own engine (``DESCRIBE HISTORY`` and the files each
version reads), what it recorded through deltaopt's extended-statistics index."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from optimizer.clustering.job import optimize
from optimizer.features import FeatureSet
from optimizer.skipping.extended import load_index, unclustered_files
from optimizer.table import open_table
from optimizer.table.delta_sql import USER_METADATA_CONF, DeltaSql
from tests.clustering.liquid import append, liquid_table

pytestmark = pytest.mark.spark

WANTED = FeatureSet.from_dict({"z": ["b"]})


def make_liquid(spark, path: str) -> str:
    """A small liquid table clustered by `a`, written in three appends (several files to cluster): a copy
    of a template built once per run (`tests.clustering.liquid`)."""
    return liquid_table(spark, path)


def names(spark, path: str, version: int) -> set[str]:
    """The data files Delta reads at `version`, by file name (names are unique)."""
    files = spark.read.format("delta").option("versionAsOf", version).load(path).inputFiles()
    return {Path(f).name for f in files}


def history(spark, path: str) -> list[dict[str, Any]]:
    rows = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()
    return [r.asDict() for r in rows]


def run_of(entry: dict[str, Any]) -> str | None:
    """The run id deltaopt's tag in a history entry names (None: no tag)."""
    metadata = json.loads(entry["userMetadata"]) if entry.get("userMetadata") else {}
    return (metadata.get("deltaopt") or {}).get("runId")


def commits_of(spark, path: str, run_id: str) -> list[int]:
    return [h["version"] for h in history(spark, path) if run_of(h) == run_id]


def recorded(path: str, run_id: str) -> set[str]:
    """File names deltaopt's index records as clustered by `run_id`, among the active files."""
    table = open_table(path)
    return {Path(p).name for p, stats in load_index(table, table.snapshot()).items() if stats.run_id == run_id}


def wrap(monkeypatch, name: str, around: Callable[..., Any]) -> None:
    """Replace `DeltaSql.<name>` by `around(original, self, *args, **kwargs)` (keywords only when given)."""
    original = getattr(DeltaSql, name)
    monkeypatch.setattr(DeltaSql, name, lambda self, *args, **kwargs: around(original, self, *args, **kwargs))


def _optimize_commits_then_fails(original, self, statement):
    """A stand-in for `_run`: Delta's OPTIMIZE commits, then the statement fails (a lost response)."""
    from optimizer.errors import TableAccessError

    result = original(self, statement)
    if statement.startswith("OPTIMIZE"):
        raise TableAccessError(f"Delta's `OPTIMIZE` on {self.uri} failed: stream closed after commit")
    return result


def test_an_append_right_after_delta_optimize_commits_is_neither_the_version_nor_recorded(spark, tmp_path, monkeypatch):
    path = make_liquid(spark, str(tmp_path / "liquid"))
    other = spark.newSession()  # another writer: its own session, none of deltaopt's settings
    run_id = f"race-{uuid.uuid4().hex[:8]}"

    def then_append(original, self, statement):
        result = original(self, statement)
        if statement.startswith("OPTIMIZE"):  # Delta's OPTIMIZE has committed: another writer appends
            append(other, path, 5000)
        return result

    wrap(monkeypatch, "_run", then_append)
    result = optimize(spark, open_table(path), WANTED, 16_000, run_id=run_id)

    entries = history(spark, path)
    assert entries[-1]["operation"] == "WRITE" and run_of(entries[-1]) is None  # the append landed last
    assert commits_of(spark, path, run_id) == [result.version], "the version reported is not the run's commit"
    assert entries[result.version]["operation"] == "OPTIMIZE"
    added = names(spark, path, result.version) - names(spark, path, result.version - 1)
    appended = names(spark, path, entries[-1]["version"]) - names(spark, path, result.version)
    assert added and appended
    assert recorded(path, run_id) == added, "the index records files the run's commit did not add"
    table = open_table(path)
    assert appended <= {Path(f.path).name for f in unclustered_files(table, table.snapshot())}


def test_files_other_commits_left_since_planning_are_not_recorded_as_the_run_s(spark, tmp_path, monkeypatch):
    """Between the run's planning snapshot and its OPTIMIZE another writer clusters the table by `a` (its
    own OPTIMIZE) and appends. With `liquid: set` the run makes `b` the keys; Delta's OPTIMIZE (not FULL)
    leaves the files clustered by `a` as they are and clusters the new file: only that is the run's."""
    path = make_liquid(spark, str(tmp_path / "liquid"))
    other = spark.newSession()
    run_id = f"race-{uuid.uuid4().hex[:8]}"
    landed: list[int] = []  # the version before the other writer's commits, and the last of them

    def others_first(original, self):
        if not landed:
            landed.append(history(spark, path)[-1]["version"])
            other.sql(f"OPTIMIZE delta.`{path}`")  # the other writer's own OPTIMIZE, by the keys (a)
            append(other, path, 5000)
            landed.append(history(spark, path)[-1]["version"])
        return original(self)

    wrap(monkeypatch, "clustering_columns", others_first)
    result = optimize(spark, open_table(path), WANTED, 16_000, run_id=run_id, liquid="set")

    assert landed and result.version is not None and result.version > landed[1]
    assert commits_of(spark, path, run_id) == [result.version]
    added = names(spark, path, result.version) - names(spark, path, result.version - 1)
    since = names(spark, path, landed[1]) - names(spark, path, landed[0])  # what the other writer's commits added
    left = names(spark, path, result.version) & since
    assert added and left, "the scenario needs files the other writer's commits added that the run's kept"
    assert recorded(path, run_id) == added, "the index records files other commits wrote since planning"


def test_two_jobs_at_once_in_one_session_each_commit_carries_its_own_run(spark, tmp_path, monkeypatch):
    """The fleet's worker pool runs two tables' jobs at once on the service's one session. Job `two` starts
    its OPTIMIZE while `one`'s runs; `one`'s commit happens while `two` is in its OPTIMIZE, as far as the
    code lets it get (with the tag session-wide and no lock, `two`'s tag is then the session's)."""
    one, two = make_liquid(spark, str(tmp_path / "one")), make_liquid(spark, str(tmp_path / "two"))
    runs = {one: f"one-{uuid.uuid4().hex[:8]}", two: f"two-{uuid.uuid4().hex[:8]}"}
    two_entered, two_at_optimize, one_done = threading.Event(), threading.Event(), threading.Event()
    second: dict[str, Any] = {}

    def job_two() -> None:
        try:
            second["result"] = optimize(spark, open_table(two), WANTED, 16_000, run_id=runs[two])
        except Exception as err:  # reported by the assertions below
            second["error"] = err
        finally:
            two_entered.set()

    def entering(original, self, *args, **kwargs):
        if self.uri.endswith("/two"):
            two_entered.set()
        return original(self, *args, **kwargs)

    def racing(original, self, statement):
        if not statement.startswith("OPTIMIZE"):
            return original(self, statement)
        if self.uri.endswith("/two"):
            two_at_optimize.set()
            one_done.wait(300)
            return original(self, statement)
        worker = threading.Thread(target=job_two)
        second["thread"] = worker
        worker.start()
        two_entered.wait(300)
        two_at_optimize.wait(10)  # at once when nothing holds `two` back before its OPTIMIZE
        try:
            return original(self, statement)
        finally:
            one_done.set()

    wrap(monkeypatch, "optimize", entering)
    wrap(monkeypatch, "_run", racing)
    first = optimize(spark, open_table(one), WANTED, 16_000, run_id=runs[one])
    second["thread"].join(600)

    assert "error" not in second, second.get("error")
    for path, result in ((one, first), (two, second["result"])):
        tagged = {h["version"]: run_of(h) for h in history(spark, path) if h["operation"] == "OPTIMIZE"}
        assert tagged == {result.version: runs[path]}, f"{Path(path).name}'s OPTIMIZE carries {tagged}"
    assert spark.conf.get(USER_METADATA_CONF, None) is None, "the session kept a run's tag"


@pytest.mark.every_change
def test_another_table_s_property_commit_during_an_optimize_is_not_a_deltaopt_optimize(spark, tmp_path, monkeypatch):
    """Job `one`'s OPTIMIZE has its tag on the session while job `two` sets a table property on its own
    table through Delta (the key-statistics property, `DeltaSparkCommitter.set_properties`): `two`'s
    property commit is not an OPTIMIZE of any deltaopt run."""
    one, two = make_liquid(spark, str(tmp_path / "one")), make_liquid(spark, str(tmp_path / "two"))
    run_id = f"one-{uuid.uuid4().hex[:8]}"
    done: dict[str, Any] = {}

    def set_two_meanwhile(original, self, statement):
        if statement.startswith("OPTIMIZE"):  # `one`'s tag is the session's now
            worker = threading.Thread(target=lambda: done.update(ok=_set_property(spark, two)))
            worker.start()
            worker.join(120)  # the property commit lands while the tag is set
            done["worker"] = worker
        return original(self, statement)

    wrap(monkeypatch, "_run", set_two_meanwhile)
    result = optimize(spark, open_table(one), WANTED, 16_000, run_id=run_id)
    done["worker"].join(300)

    assert done.get("ok") and result.version is not None
    commits = open_table(two).history()
    assert any(c.operation == "SET TBLPROPERTIES" for c in commits), "the scenario needs two's property commit"
    ours = [(c.version, c.operation, dict(c.deltaopt)) for c in commits if c.is_deltaopt_optimize]
    assert ours == [], f"two's history reads as a deltaopt OPTIMIZE: {ours}"
    assert [c.version for c in open_table(one).history() if c.is_deltaopt_optimize] == [result.version]


def _set_property(spark, path: str) -> bool:
    from optimizer.table.deltaspark import DeltaSparkCommitter

    DeltaSparkCommitter(spark, open_table(path)).set_properties({"delta.dataSkippingNumIndexedCols": "8"})
    return True


def test_a_failure_after_delta_optimize_committed_reports_the_commit_and_records_its_files(
    spark, tmp_path, monkeypatch
):
    """Delta's OPTIMIZE commits, then the statement fails (a post-commit hook; a Connect stream dropped
    after the server committed): the run committed, so its version is reported and its files recorded."""
    path = make_liquid(spark, str(tmp_path / "liquid"))
    run_id = f"lost-{uuid.uuid4().hex[:8]}"

    wrap(monkeypatch, "_run", _optimize_commits_then_fails)
    result = optimize(spark, open_table(path), WANTED, 16_000, run_id=run_id)

    assert commits_of(spark, path, run_id) == [result.version]
    added = names(spark, path, result.version) - names(spark, path, result.version - 1)
    assert added and recorded(path, run_id) == added
    assert result.files_out == len(added) and result.files_in > 0


def test_a_failure_before_delta_optimize_committed_still_fails(spark, tmp_path, monkeypatch):
    from optimizer.errors import TableAccessError

    path = make_liquid(spark, str(tmp_path / "liquid"))
    before = len(history(spark, path))

    def failed(original, self, statement):
        if statement.startswith("OPTIMIZE"):
            raise TableAccessError(f"Delta's `OPTIMIZE` on {self.uri} failed: refused")
        return original(self, statement)

    wrap(monkeypatch, "_run", failed)
    with pytest.raises(TableAccessError, match="refused"):
        optimize(spark, open_table(path), WANTED, 16_000, run_id=f"no-{uuid.uuid4().hex[:8]}")
    assert len(history(spark, path)) == before


def test_a_transient_describe_failure_under_set_changes_no_keys(spark, tmp_path, monkeypatch):
    """The keys are already the wanted ones (`a`); DESCRIBE DETAIL fails once: the run fails before any
    commit instead of taking the keys for none and committing a needless CLUSTER BY."""
    from optimizer.errors import TableAccessError

    path = make_liquid(spark, str(tmp_path / "liquid"))
    before = len(history(spark, path))

    def fails_once(original, self):
        raise TableAccessError(f"Delta cannot describe {self.uri}: connection reset")

    wrap(monkeypatch, "detail", fails_once)
    with pytest.raises(TableAccessError, match="connection reset"):
        optimize(spark, open_table(path), FeatureSet.from_dict({"z": ["a"]}), 16_000, liquid="set")
    assert len(history(spark, path)) == before, [h["operation"] for h in history(spark, path)[before:]]


def test_a_nested_liquid_key_is_recorded_as_a_struct_path(spark, tmp_path):
    """Delta's DESCRIBE DETAIL names a nested clustering column `s.x`: the run's index records it as the
    struct path s.x, not as one column named `s.x`."""
    from optimizer.skipping.extended import load_index_with_runs

    path = str(tmp_path / "nested")
    spark.sql(f"CREATE TABLE delta.`{path}` (a INT, s STRUCT<x: INT, y: INT>) USING delta CLUSTER BY (s.x)")
    for start in (0, 500):
        rows = spark.range(start, start + 500).selectExpr(
            "cast(id as int) a", "named_struct('x', cast(id % 9 as int), 'y', 1) s"
        )
        rows.repartition(2).write.format("delta").mode("append").save(path)
    assert spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]["clusteringColumns"] == ["s.x"]
    run_id = f"nested-{uuid.uuid4().hex[:8]}"

    result = optimize(spark, open_table(path), WANTED, 16_000, run_id=run_id)

    table = open_table(path)
    assert result.version is not None
    features = load_index_with_runs(table, table.snapshot())[1][run_id]
    assert features["z"] == ["s.x"], features


def test_an_optimize_committed_in_batches_reports_the_last_and_records_every_batch(spark, tmp_path):
    """With ``spark.databricks.delta.optimize.batchSize`` Delta's OPTIMIZE commits one transaction per
    batch of bins (OptimizeTableCommand.optimize, Delta 4.0.1), each with the session's user metadata:
    every commit the run's tag is on is the run's, and the files each added are recorded."""
    from optimizer.clustering.by_delta import CommandRun, optimize_with_delta
    from optimizer.table.delta_sql_commit import DeltaSqlCommitter
    from optimizer.table.rewrite_path import Capabilities, OpenedPath, choose_path

    path = str(tmp_path / "parts")
    rows = spark.range(0, 2400).selectExpr("cast(id % 3 as int) p", "(id * 7919) % 1000 b")
    for part in (rows.filter("id < 1200"), rows.filter("id >= 1200")):
        part.repartition(2).write.format("delta").mode("append").partitionBy("p").save(path)
    table = open_table(path)
    run_id = f"batches-{uuid.uuid4().hex[:8]}"
    spark.conf.set("spark.databricks.delta.optimize.batchSize", "1")  # one bin (partition) per commit
    snapshot = table.snapshot()
    sql_path = choose_path(Capabilities.connect(), snapshot.features, liquid="keep", uri=path, version=snapshot.version)
    opened = OpenedPath(sql_path, DeltaSqlCommitter(spark, table, sql_path, sql_path.engine), snapshot)
    try:
        result = optimize_with_delta(opened, table, WANTED, CommandRun(run_id, lambda _: None))
    finally:
        spark.conf.unset("spark.databricks.delta.optimize.batchSize")

    versions = commits_of(spark, path, run_id)
    assert len(versions) == 3, f"the scenario needs one commit per partition: {versions}"
    assert result.version == versions[-1]
    added = set().union(*(names(spark, path, v) - names(spark, path, v - 1) for v in versions))
    assert recorded(path, run_id) == added, "files of some of the run's commits are not recorded"


def test_a_busy_commit_lock_is_logged_and_given_up_after_the_wait(spark, tmp_path, monkeypatch, caplog):
    """Job `one`'s OPTIMIZE holds the session's commit tag (a stalled Connect stream, an hours-long
    OPTIMIZE); job `two` logs whose OPTIMIZE it waits for and, after the wait, fails in one line naming
    that run, having committed nothing, instead of parking its worker forever."""
    import logging

    from optimizer.errors import TableAccessError
    from optimizer.table import delta_sql

    one, two = make_liquid(spark, str(tmp_path / "one")), make_liquid(spark, str(tmp_path / "two"))
    before = len(history(spark, two))
    monkeypatch.setattr(delta_sql, "COMMIT_WAIT_SECONDS", 2.0, raising=False)
    stalled, release = threading.Event(), threading.Event()

    def stalls(original, self, statement):
        if statement.startswith("OPTIMIZE") and self.uri.rstrip("/").endswith("/one"):
            stalled.set()
            release.wait(600)
            raise TableAccessError(f"Delta's `OPTIMIZE` on {self.uri} failed: stream stalled")
        return original(self, statement)

    wrap(monkeypatch, "_run", stalls)
    holder = threading.Thread(target=lambda: _fails(DeltaSql(spark, one), {"runId": "run-one"}), daemon=True)
    holder.start()
    assert stalled.wait(120)
    second: dict[str, Any] = {}
    waiter = threading.Thread(target=lambda: second.update(error=_fails(DeltaSql(spark, two), {"runId": "run-two"})))
    try:
        with caplog.at_level(logging.INFO, logger="optimizer.table.delta_sql"):
            waiter.start()
            waiter.join(60)
            parked = waiter.is_alive()
    finally:
        release.set()
        holder.join(120)
        waiter.join(300)

    assert not parked, "job two's worker is parked on the lock with no time limit"
    error = second.get("error")
    assert isinstance(error, TableAccessError) and "run run-one's OPTIMIZE of" in str(error), error
    assert "\n" not in str(error)
    assert any("waiting for run run-one's OPTIMIZE of" in r.getMessage() for r in caplog.records), caplog.text
    assert len(history(spark, two)) == before, "job two committed while giving up"


def _fails(delta: DeltaSql, tag: dict[str, Any]) -> Exception | None:
    """The error `delta.optimize` raised (None: none)."""
    try:
        delta.optimize([], tag)
    except Exception as err:  # returned to the test's assertions
        return err
    return None


def test_a_failed_restore_of_the_session_tag_does_not_hide_that_delta_committed(spark, tmp_path, monkeypatch):
    """Delta's OPTIMIZE commits, the Connect stream drops, and restoring the session's user metadata fails
    on the dropped connection too: the run is still settled from the log (reported, files recorded), not
    lost behind the restore's error."""
    from pyspark.sql.conf import RuntimeConfig

    path = make_liquid(spark, str(tmp_path / "liquid"))
    run_id = f"dropped-{uuid.uuid4().hex[:8]}"

    unset = RuntimeConfig.unset

    def dropped(self, key):
        if key == USER_METADATA_CONF:
            raise ConnectionError("connection dropped")
        return unset(self, key)

    wrap(monkeypatch, "_run", _optimize_commits_then_fails)
    monkeypatch.setattr(RuntimeConfig, "unset", dropped)
    try:
        result = optimize(spark, open_table(path), WANTED, 16_000, run_id=run_id)
    finally:
        monkeypatch.setattr(RuntimeConfig, "unset", unset)
        spark.conf.unset(USER_METADATA_CONF)

    assert commits_of(spark, path, run_id) == [result.version]
    added = names(spark, path, result.version) - names(spark, path, result.version - 1)
    assert added and recorded(path, run_id) == added


def test_an_optimize_failing_after_set_changed_the_keys_says_they_changed(spark, tmp_path, monkeypatch):
    """`liquid: set` commits CLUSTER BY (a -> b), then Delta's OPTIMIZE fails: the error says the keys
    were changed, as they were (DESCRIBE DETAIL), not only that OPTIMIZE failed."""
    from optimizer.errors import TableAccessError

    path = make_liquid(spark, str(tmp_path / "liquid"))

    def failed(original, self, statement):
        if statement.startswith("OPTIMIZE"):
            raise TableAccessError(f"Delta's `OPTIMIZE` on {self.uri} failed: refused")
        return original(self, statement)

    wrap(monkeypatch, "_run", failed)
    with pytest.raises(TableAccessError, match="refused") as raised:
        optimize(spark, open_table(path), WANTED, 16_000, run_id=f"set-{uuid.uuid4().hex[:8]}", liquid="set")

    assert spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]["clusteringColumns"] == ["b"]
    assert "clustering keys" in str(raised.value) and "(a) to (b)" in str(raised.value), raised.value
