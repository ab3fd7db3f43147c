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

START, END = "<!-- timing -->", "<!-- /timing -->"


def directory_of(classname: str, file: str | None) -> str:
    """The test's directory: from its file when the report names it, else from its dotted class name
    (``tests.clusters.test_standalone`` -> ``tests/clusters``; a doctest ``optimizer.table.stats`` ->
    ``optimizer (doctests)``)."""
    if file:
        parent = Path(file).parent.as_posix()
        return parent if parent.startswith("tests") else f"{Path(file).parts[0]} (doctests)"
    parts = classname.split(".")
    if parts[0] != "tests":
        return f"{parts[0]} (doctests)"
    modules = [p for p in parts[1:] if not p[:1].isupper()]  # a test class's name is not a directory
    return "/".join(["tests", *modules[:-1]])


def per_directory(report: Path) -> tuple[dict[str, tuple[int, float]], float]:
    """Tests and seconds per directory, and the run's wall-clock seconds as the report gives them."""
    root = ElementTree.parse(report).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for case in root.iter("testcase"):
        if case.find("skipped") is not None:
            continue
        entry = totals[directory_of(case.get("classname", ""), case.get("file"))]
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
