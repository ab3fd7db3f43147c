"""The suite's time per test directory, from a pytest JUnit report, as a markdown table (README, "Tests").

    .venv/bin/pytest --junitxml=/tmp/junit.xml && .venv/bin/python -m tests.timing /tmp/junit.xml --readme README.md

prints the table and, with ``--readme``, puts it between the file's ``<!-- timing -->`` and
``<!-- /timing -->`` lines.

A test's time in the report includes its fixtures' setup, so a session fixture (the shared SparkSession's
JVM, a cluster's servers) is counted in the directory of the first test that asked for it. Doctests
(``--doctest-modules`` over the packages) are counted under their package."""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path

from tests.tiers import node_id

START, END = "<!-- timing -->", "<!-- /timing -->"


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


def per_directory(report: Path) -> tuple[dict[str, tuple[int, float]], float]:
    """Tests and seconds per directory, and the run's wall-clock seconds as the report gives them."""
    root = ElementTree.parse(report).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for case in root.iter("testcase"):
        if case.find("skipped") is not None:
            continue
        entry = totals[directory_of(module_of(case))]
        entry[0] += 1
        entry[1] += float(case.get("time", 0))
    wall = sum(float(s.get("time", 0)) for s in suites)
    return {d: (int(n), s) for d, (n, s) in totals.items()}, wall


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
    args = parser.parse_args(argv)
    rendered = table(*per_directory(args.report))
    print(rendered)
    if args.readme:
        args.readme.write_text(with_table(args.readme.read_text(), rendered))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
