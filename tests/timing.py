"""The suite's time per test directory, from a pytest JUnit report, as a markdown table (README, "Tests"), and
each module's seconds, the order in which `make test`'s workers take the modules (``tests/durations.txt``).

    .venv/bin/pytest --junitxml=/tmp/junit.xml && .venv/bin/python -m tests.timing /tmp/junit.xml --readme README.md

prints the table and, with ``--readme``, puts it between the file's ``<!-- timing -->`` and
``<!-- /timing -->`` lines; with ``--durations tests/durations.txt`` it writes each module's seconds there.

pytest-xdist hands a worker the next module when it is nearly done with its last. In the order xdist picks by
itself (most tests first) the cluster modules, a few tests of half a minute each, came last, and one worker
ran alone for the last minute and a half. Taking the longest modules first (`longest_first`, in the workers'
collection) leaves the short ones to even out the end.

A test's time in the report includes its fixtures' setup, so a session fixture (the shared SparkSession's
JVM, a cluster's servers) is counted in the directory of the first test that asked for it. Doctests
(``--doctest-modules`` over the packages) are counted under their package."""

from __future__ import annotations

import argparse
import math
import re
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from tests.tiers import node_id

T = TypeVar("T")

START, END = "<!-- timing -->", "<!-- /timing -->"
DURATIONS = Path(__file__).resolve().parent / "durations.txt"
DURATIONS_HEADER = """\
# Each test module's seconds in the last timed run, longest first: `make test`'s workers take the modules in
# this order (tests/timing.py, `longest_first`). Written by `python -m tests.timing JUNIT --durations FILE`.
"""


def module_of(case: ElementTree.Element) -> str:
    """The file of a JUnit test case, as pytest names it: from the report's ``file`` when it has one, else from
    the dotted class name (``tests.service.test_service.TestGroup`` -> ``tests/service/test_service.py``;
    a doctest's ``optimizer.table.stats`` -> ``optimizer/table/stats.py``)."""
    file = case.get("file")
    if file:
        return Path(file).as_posix()
    # a module that failed to collect is reported with no class name, under its dotted name
    return node_id(case.get("classname") or case.get("name", ""), "").split("::")[0]


def directory_of(module: str) -> str:
    """The module's directory in the table (``tests/clusters``); a doctest's package as ``optimizer (doctests)``."""
    path = Path(module)
    return path.parent.as_posix() if path.parts[0] == "tests" else f"{path.parts[0]} (doctests)"


def _cases(report: Path) -> tuple[list[ElementTree.Element], float]:
    """The report's test cases that ran (a skipped one is not timed), and the run's wall-clock seconds."""
    root = ElementTree.parse(report).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    ran = [case for case in root.iter("testcase") if case.find("skipped") is None]
    return ran, sum(float(s.get("time", 0)) for s in suites)


def per_directory(report: Path) -> tuple[dict[str, tuple[int, float]], float]:
    """Tests and seconds per directory, and the run's wall-clock seconds as the report gives them."""
    cases, wall = _cases(report)
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for case in cases:
        entry = totals[directory_of(module_of(case))]
        entry[0] += 1
        entry[1] += float(case.get("time", 0))
    return {d: (int(n), s) for d, (n, s) in totals.items()}, wall


def per_module(report: Path) -> dict[str, float]:
    """Seconds per test module (fixtures' setup included, as `per_directory` counts them)."""
    totals: dict[str, float] = defaultdict(float)
    for case in _cases(report)[0]:
        totals[module_of(case)] += float(case.get("time", 0))
    return dict(totals)


def durations_text(seconds: Mapping[str, float]) -> str:
    """``tests/durations.txt``'s text: one ``seconds module`` line per module, longest first."""
    ranked = sorted(seconds.items(), key=lambda item: (-item[1], item[0]))
    return DURATIONS_HEADER + "".join(f"{s:.1f} {module}\n" for module, s in ranked)


def read_durations(path: Path = DURATIONS) -> dict[str, float]:
    """The modules' seconds `durations_text` wrote; none when the file is missing. A line that is not
    ``seconds module`` is passed over: the order is a speed-up, never a reason for a run to fail."""
    if not path.is_file():
        return {}
    seconds = {}
    for line in path.read_text().splitlines():
        match = re.fullmatch(r"(\d+(?:\.\d+)?) (\S+)", line.strip())
        if match:
            seconds[match[2]] = float(match[1])
    return seconds


def longest_first(items: Sequence[T], module: Callable[[T], str], seconds: Mapping[str, float]) -> list[T]:
    """`items` with whole modules ordered by their `seconds`, longest first, each module's items in their own
    order. A module with no figure (new since the last timed run) goes first: its time is unknown, and a long
    module met at the end is what leaves a worker alone."""
    rank = {name: -seconds.get(name, math.inf) for name in {module(item) for item in items}}
    return sorted(items, key=lambda item: rank[module(item)])  # stable: a module's items keep their order


def table(totals: dict[str, tuple[int, float]], wall: float) -> str:
    """The markdown table: slowest directory first, then the sum and the run's wall clock."""
    spent = sum(s for _, s in totals.values())
    lines = ["| directory | tests | seconds | share |", "|---|---:|---:|---:|"]
    for name, (count, seconds) in sorted(totals.items(), key=lambda item: -item[1][1]):
        lines.append(f"| {name} | {count} | {seconds:.0f} | {100 * seconds / spent:.0f}% |")
    tests = sum(n for n, _ in totals.values())
    lines.append(f"| **all tests** | {tests} | {spent:.0f} ({spent / 60:.1f} min) | 100% |")
    lines.append(f"| **the run, wall clock** | | {wall:.0f} ({wall / 60:.1f} min) | |")
    return "\n".join(lines)


def with_table(text: str, rendered: str) -> str:
    """`text` with the lines between its timing markers replaced by `rendered`."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.strip() == START]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise SystemExit(f"the file needs one {START} line and one {END} line after it")
    return "".join([*lines[: starts[0] + 1], rendered + "\n", *lines[ends[0] :]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="a pytest --junitxml report")
    parser.add_argument("--readme", type=Path, help="put the table between this file's timing markers")
    parser.add_argument("--durations", type=Path, help="write each module's seconds here (tests/durations.txt)")
    args = parser.parse_args(argv)
    rendered = table(*per_directory(args.report))
    print(rendered)
    if args.readme:
        args.readme.write_text(with_table(args.readme.read_text(), rendered))
    if args.durations:
        args.durations.write_text(durations_text(per_module(args.report)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
