"""`tests/timing.py`: the README's time per test directory, summed from a JUnit report."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.timing import per_directory, table

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="6" time="100.5">
<testcase classname="tests.clusters.test_standalone" name="test_a" time="40.0"/>
<testcase classname="tests.clusters.test_catalog" name="test_b" time="20.0"/>
<testcase classname="tests.test_cli" name="test_c" time="5.5"/>
<testcase classname="tests.service.test_service.TestGroup" name="test_d" time="30.0"/>
<testcase classname="optimizer.table.stats" name="optimizer.table.stats.parse" time="0.5"/>
<testcase classname="" name="tests.test_broken" time="0.2"><error message="collection failure"/></testcase>
<testcase classname="tests.service.test_service" name="test_e" time="9.0"><skipped message="no"/></testcase>
</testsuite></testsuites>
"""


def test_time_is_summed_per_directory_with_classes_doctests_and_skips_apart(tmp_path: Path):
    report = tmp_path / "junit.xml"
    report.write_text(REPORT)
    totals, wall = per_directory(report)
    assert totals == {
        "tests/clusters": (2, 60.0),
        "tests": (2, 5.7),  # with a module that failed to collect, under its own name
        "tests/service": (1, 30.0),  # a test class is not a directory; the skipped test is not counted
        "optimizer (doctests)": (1, 0.5),
    }
    assert wall == 100.5
    rows = table(totals, wall).splitlines()
    assert rows[2] == "| tests/clusters | 2 | 60 | 62% |"  # slowest first
    assert rows[-2] == "| **all tests** | 6 | 96 (1.6 min) | 100% |"
    assert rows[-1] == "| **the run, wall clock** | | 100 (1.7 min) | |"


def test_the_table_replaces_what_is_between_the_markers_and_nothing_else():
    from tests.timing import with_table

    text = "# Tests\nrun it:\n<!-- timing -->\n| old |\n| table |\n<!-- /timing -->\nafter\n"
    assert with_table(text, "| new |") == "# Tests\nrun it:\n<!-- timing -->\n| new |\n<!-- /timing -->\nafter\n"
    with pytest.raises(SystemExit, match="needs one"):
        with_table("no markers\n", "| new |")
