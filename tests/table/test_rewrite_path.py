"""The one place that chooses how a table is rewritten (issue 50): capabilities x features x liquid x
forced engine -> path or refusal, the commit-time re-check, and an AST check that no other module
chooses the path itself."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

from optimizer import errors
from optimizer.table.protocol import TableFeatures
from optimizer.table.rewrite_path import Capabilities, LaidOutBy, choose_path

ROOT = Path(__file__).resolve().parents[2]
PLAIN = TableFeatures()
LIQUID = TableFeatures(3, 7, frozenset(), frozenset({"clustering", "domainMetadata"}))
DV = TableFeatures(3, 7, frozenset({"deletionVectors"}), frozenset({"deletionVectors"}))
UNKNOWN_LIQUID = TableFeatures(3, 7, frozenset(), frozenset({"clustering", "futureThing"}))
DELTA = "org.apache.spark.sql.delta"
NO_SESSION = Capabilities(session=False, jvm=False, delta=None)
WITH_DELTA = Capabilities(session=True, jvm=True, delta=DELTA)
JVM_NO_DELTA = Capabilities(session=True, jvm=True, delta=None)
CONNECT = Capabilities.connect()


@pytest.mark.parametrize(
    ("capabilities", "features", "engine", "laid_out_by"),
    [
        (NO_SESSION, PLAIN, "delta-rs", LaidOutBy.DELTAOPT),
        (WITH_DELTA, PLAIN, "delta-spark", LaidOutBy.DELTAOPT),
        (WITH_DELTA, DV, "delta-spark", LaidOutBy.DELTAOPT),
        (WITH_DELTA, LIQUID, "delta-spark", LaidOutBy.DELTA_LIQUID),
        (CONNECT, PLAIN, "delta-sql", LaidOutBy.DELTA_ZORDER),
        (CONNECT, LIQUID, "delta-sql", LaidOutBy.DELTA_LIQUID),
        (JVM_NO_DELTA, PLAIN, "delta-rs", LaidOutBy.DELTAOPT),
        (Capabilities.connect("delta-rs"), PLAIN, "delta-rs", LaidOutBy.DELTAOPT),
        (Capabilities(True, True, DELTA, "delta-rs"), PLAIN, "delta-rs", LaidOutBy.DELTAOPT),
        (Capabilities.connect("delta-spark"), PLAIN, "delta-sql", LaidOutBy.DELTA_ZORDER),
        (Capabilities.databricks(serverless=True), PLAIN, "delta-sql", LaidOutBy.DELTA_ZORDER),
        (Capabilities.databricks(serverless=False), LIQUID, "delta-spark", LaidOutBy.DELTA_LIQUID),
    ],
)
def test_the_path_of_each_session_and_table(capabilities, features, engine, laid_out_by):
    path = choose_path(capabilities, features, liquid="keep")
    assert (path.engine, path.laid_out_by) == (engine, laid_out_by)
    assert path.delta_reader == features.needs_delta_reader


@pytest.mark.parametrize(
    ("capabilities", "features", "error", "match"),
    [
        (NO_SESSION, LIQUID, errors.UnsupportedTableError, r"liquid-clustered.*delta-rs \(no Spark session\)"),
        (Capabilities(True, True, DELTA, "delta-rs"), LIQUID, errors.UnsupportedTableError, r"commit is delta-rs"),
        (JVM_NO_DELTA, LIQUID, errors.UnsupportedTableError, r"liquid-clustered.*JVM has no Delta engine"),
        (NO_SESSION, DV, errors.UnsupportedTableError, "deletionVectors.*no Delta engine"),
        (WITH_DELTA, UNKNOWN_LIQUID, errors.UnsupportedTableError, "futureThing"),
        (Capabilities(True, True, None, "delta-spark"), PLAIN, errors.SparkRuntimeError, "spark.commit is delta-spark"),
    ],
)
def test_refusals_before_any_work(capabilities, features, error, match):
    with pytest.raises(error, match=match):
        choose_path(capabilities, features, liquid="keep")


def test_sql_only_is_the_delta_sql_engine():
    assert CONNECT.sql_only and Capabilities.databricks(serverless=True).sql_only
    assert not Capabilities.connect("delta-rs").sql_only and not WITH_DELTA.sql_only


def test_a_jvm_without_delta_but_delta_spark_forced_is_not_sql_only_and_raises_only_when_the_engine_is_asked():
    """A local session without Delta where ``spark.commit: delta-spark`` forces it: not SQL only (an estimate
    may price deltaopt's layout), and the refusal comes when the job chooses its path, naming the setting."""
    forced = Capabilities(session=True, jvm=True, delta=None, forced="delta-spark")
    assert forced.sql_only is False
    with pytest.raises(errors.SparkRuntimeError, match=r"spark\.commit is delta-spark"):
        forced.engine()


@pytest.mark.parametrize(
    ("capabilities", "planned", "now", "moved"),
    [
        (WITH_DELTA, PLAIN, LIQUID, "became liquid-clustered"),
        (NO_SESSION, PLAIN, LIQUID, "became liquid-clustered"),
        (CONNECT, PLAIN, LIQUID, "became liquid-clustered"),
        (CONNECT, LIQUID, PLAIN, "is no longer liquid-clustered"),
        (WITH_DELTA, LIQUID, PLAIN, "is no longer liquid-clustered"),
    ],
)
def test_a_path_that_moved_between_plan_and_commit_is_refused(capabilities, planned, now, moved):
    path = choose_path(capabilities, planned, liquid="keep", uri="/t", version=3)
    path.recheck(planned, 4)  # unchanged: goes ahead
    with pytest.raises(errors.CommitConflictError, match=f"{moved}.*decided at version 3.*nothing was committed"):
        path.recheck(now, 5)


# --- the path is chosen in one module ---------------------------------------------------------------

PROVIDERS = {"optimizer/table/rewrite_path.py", "optimizer/table/delta_adapter.py", "optimizer/table/delta_engine.py"}
# protocol.py defines the features and the refusals they imply (`check_rewritable`, `check_readable`),
# which `choose_path` applies: not a choice of path
FACTS = {"optimizer/table/protocol.py"}
# describes the session in a status line (`_jvm` absent: Connect), chooses nothing
REPORTS = {"optimizer/cli/common.py"}
ENGINES = {"delta-rs", "delta-spark", "delta-sql"}
FEATURE_FLAGS = {"clustered", "needs_delta_reader", "needs_delta_writer"}


def _choices(source: str) -> list[tuple[int, str]]:
    """Where `source` chooses a rewrite path itself: a comparison with a commit-engine literal, or a
    condition (if / while / conditional expression / boolean operand) reading ``_jvm``, calling
    ``delta_classes`` or reading a feature flag that decides the path."""
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            literals = [c.value for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)]
            found += [(node.lineno, f"compares {v!r}") for v in literals if v in ENGINES]
        tests = []
        if isinstance(node, ast.If | ast.While | ast.IfExp):
            tests.append(node.test)
        elif isinstance(node, ast.BoolOp):
            tests.extend(node.values)
        for test in tests:
            for inner in ast.walk(test):
                if isinstance(inner, ast.Attribute) and inner.attr in FEATURE_FLAGS | {"_jvm"}:
                    found.append((inner.lineno, f"branches on .{inner.attr}"))
                elif isinstance(inner, ast.Constant) and inner.value == "_jvm":
                    found.append((inner.lineno, "branches on _jvm"))
                elif isinstance(inner, ast.Call) and getattr(inner.func, "id", None) == "delta_classes":
                    found.append((inner.lineno, "branches on delta_classes"))
    return found


def test_the_path_is_chosen_in_one_module():
    offenders = []
    for path in (ROOT / "optimizer").rglob("*.py"):
        name = str(path.relative_to(ROOT))
        if name in PROVIDERS | FACTS | REPORTS:
            continue
        offenders += [f"{name}:{line}: {what}" for line, what in _choices(path.read_text())]
    assert not offenders, "the rewrite path is chosen outside rewrite_path.py: " + "; ".join(sorted(set(offenders)))


@pytest.mark.parametrize(
    "planted",
    [
        'engine = "delta-sql" if x else "delta-rs"\nif engine == "delta-sql":\n    pass\n',
        'if getattr(spark, "_jvm", None) is None:\n    pass\n',
        "if delta_classes(spark) is not None:\n    pass\n",
        "if snapshot.features.clustered:\n    pass\n",
        "ok = a and features.needs_delta_writer\n",
    ],
)
def test_the_check_sees_a_planted_choice(planted):
    assert _choices(planted)


def test_a_jvm_without_delta_s_classes_has_no_delta_and_a_jvm_that_does_not_answer_is_an_error():
    """The JVM answering ClassNotFoundException: no Delta engine (delta-rs commits). A gateway that does not
    answer (the driver died): one clear error, never "no Delta engine", which would skip a liquid table
    and restart its key streak for a cause that is not there."""
    from optimizer.table.delta_engine import delta_classes
    from tests.table.py4j_standins import class_not_found, jvm_failing_lookups, no_answer

    absent = SimpleNamespace(_jvm=jvm_failing_lookups(class_not_found()))
    assert delta_classes(absent) is None  # type: ignore[arg-type]
    dead = SimpleNamespace(_jvm=jvm_failing_lookups(no_answer()))
    with pytest.raises(errors.SparkRuntimeError, match="cannot ask the session's JVM whether Delta is there"):
        delta_classes(dead)  # type: ignore[arg-type]
