"""`tests/tiers.py`: the thorough tier leaves out only tests whose lines cheaper kept tests cover."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.tiers import ROOT, choose, lines_per_test, listed, node_id, seconds_per_test


def test_junit_names_become_node_ids():
    assert node_id("tests.clusters.test_standalone", "test_a[x-y]") == "tests/clusters/test_standalone.py::test_a[x-y]"
    assert (
        node_id("tests.service.test_service.TestGroup", "test_d") == "tests/service/test_service.py::TestGroup::test_d"
    )
    assert (
        node_id("optimizer.table.stats", "optimizer.table.stats.parse")
        == "optimizer/table/stats.py::optimizer.table.stats.parse"
    )


def _lines(*numbers: int) -> frozenset[tuple[str, int]]:
    return frozenset(("optimizer/x.py", n) for n in numbers)


def test_a_test_leaves_only_when_every_line_it_runs_stays_covered():
    lines = {
        "cheap": _lines(1, 2),
        "broad": _lines(1, 2, 3, 4, 5),  # covers what the narrow ones cover, at less time than both together
        "narrow_a": _lines(3, 4),
        "narrow_b": _lines(5),
        "unique": _lines(6),  # the only test of line 6: stays however slow
        "pinned": _lines(1),  # a crash test: stays, though its lines are covered
    }
    seconds = {
        "cheap": 0.5,
        "broad": 6.0,
        "narrow_a": 5.0,
        "narrow_b": 5.0,
        "unique": 60.0,
        "pinned": 20.0,
        "unseen": 30.0,
    }
    left_out = choose(lines, seconds, cheap=2.0, kept=["pinned"])
    assert left_out == ["narrow_a", "narrow_b"]  # "unseen" had no lines recorded: it stays
    kept = set().union(*(lines[t] for t in lines if t not in left_out))
    assert kept == set().union(*lines.values())


def test_cheaper_tests_covering_the_same_lines_are_preferred():
    lines = {"slow_twin": _lines(1, 2), "fast_twin": _lines(1, 2)}
    assert choose(lines, {"slow_twin": 40.0, "fast_twin": 3.0}, cheap=2.0) == ["slow_twin"]


def test_a_property_test_stays_and_its_lines_cover_nothing_for_others():
    lines = {"property": _lines(1, 2), "example": _lines(2), "twin": _lines(1)}
    seconds = {"property": 0.5, "example": 5.0, "twin": 5.0}
    assert choose(lines, seconds, cheap=2.0, drawn=["property"]) == []
    assert choose(lines, seconds, cheap=2.0) == ["example", "twin"]


def test_a_pick_later_picks_cover_leaves_too():
    """Greedy picks "mid" first (most lines per second); "left" and "right" are then needed for 1 and 4,
    and cover 2 and 3 between them, so "mid" goes."""
    lines = {"mid": _lines(2, 3), "left": _lines(1, 2), "right": _lines(3, 4)}
    assert choose(lines, {"mid": 2.0, "left": 3.0, "right": 3.0}, cheap=1.0) == ["mid"]


def test_lines_are_read_per_node_id_whatever_it_holds(tmp_path: Path):
    """A parametrised id may hold ``|``, coverage's separator of static and dynamic contexts."""
    from coverage import CoverageData

    data = CoverageData(basename=str(tmp_path / ".coverage"))
    data.set_context("tests/a.py::test_p[a|b]")
    data.add_lines({str(ROOT / "optimizer" / "x.py"): [3, 4]})
    data.set_context("")
    data.add_lines({str(ROOT / "optimizer" / "x.py"): [1]})
    data.write()
    assert lines_per_test(tmp_path / ".coverage") == {"tests/a.py::test_p[a|b]": _lines(3, 4)}


def test_a_failed_test_is_reported_apart(tmp_path: Path):
    report = tmp_path / "junit.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest" time="9"><testcase classname="tests.test_a" name="test_ok" time="3"/>'
        '<testcase classname="tests.test_a" name="test_bad" time="6"><failure message="x"/></testcase>'
        "</testsuite></testsuites>"
    )
    assert seconds_per_test(report) == (
        {"tests/test_a.py::test_ok": 3.0, "tests/test_a.py::test_bad": 6.0},
        {"tests/test_a.py::test_bad"},
    )


def test_every_listed_test_is_collected():
    """A renamed test or a changed parameter must leave the list, or the tier silently shrinks."""
    thorough = listed()
    files = sorted({test.split("::")[0] for test in thorough})
    if not files:
        return
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "", "-p", "no:cacheprovider", *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    collected = {line.strip() for line in done.stdout.splitlines()}
    assert not thorough - collected, (
        f"tests/thorough.txt names tests pytest does not collect: {sorted(thorough - collected)}"
    )
