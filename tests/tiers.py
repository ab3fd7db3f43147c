"""Which tests the default run needs: the cheapest set that covers every line the whole suite covers.

    .venv/bin/python -m tests.tiers coverage  # the default and thorough tests under coverage (~1.15x their time)
    .venv/bin/python -m tests.tiers choose /tmp/deltaopt-tiers/.coverage /tmp/deltaopt-tiers/junit.xml

``coverage`` runs the default and thorough tests under coverage.py with each test's node id as the context of the lines
it runs, in its own process and in every Python process it starts (the CLI, the service, the drivers of the
cluster tests), and writes the data and a JUnit report with each test's seconds. ``choose`` keeps every test
cheaper than ``--cheap`` seconds, then adds the expensive test that covers the most lines still uncovered per
second until every line the run covered is covered (tests marked ``every_change`` always stay), and writes
the others to ``tests/thorough.txt``: the ``thorough`` tier, which ``make test-slow`` runs and ``make test``
leaves out (``tests/conftest.py``).

The criterion is line coverage of deltaopt's packages, so a test leaves the default run only when every
line it runs is run by a test that stays. What a thorough test adds is another shape, zone or interleaving
through the same lines; that is worth running before a release, not on every change (README, "Tests").
A test the coverage run did not see (new, renamed) stays in the default run."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIST = ROOT / "tests" / "thorough.txt"
HEADER = """\
# The thorough tier: tests whose every covered line a cheaper test in the default run also covers.
# Written by `python -m tests.tiers choose` (tests/tiers.py) from a coverage run of both tiers;
# `make test-slow` runs them, `make test` does not. One pytest node id per line.
"""
Lines = frozenset[tuple[str, int]]


def node_id(classname: str, name: str) -> str:
    """A JUnit test case's pytest node id: ``tests.a.test_b.C`` and ``test_d[x]`` are
    ``tests/a/test_b.py::C::test_d[x]``."""
    parts = classname.split(".")
    classes = [p for p in parts if p[:1].isupper()]
    modules = [p for p in parts if not p[:1].isupper()]
    return "::".join([f"{'/'.join(modules)}.py", *classes, name])


def seconds_per_test(report: Path) -> tuple[dict[str, float], set[str]]:
    """Each test's seconds in a JUnit report (fixtures' setup included), by node id, and the tests that
    failed or errored (their lines may be short of what they cover when they pass)."""
    root = ElementTree.parse(report).getroot()
    seconds, failed = {}, set()
    for case in root.iter("testcase"):
        if case.find("skipped") is not None:
            continue
        test = node_id(case.get("classname", ""), case.get("name", ""))
        seconds[test] = float(case.get("time", 0))
        if case.find("failure") is not None or case.find("error") is not None:
            failed.add(test)
    return seconds, failed


def lines_per_test(data_file: Path) -> dict[str, Lines]:
    """The lines each test ran: the pytest process records them under the test's node id as a dynamic
    context, a child process as its static one, so the context is the node id either way (an id may hold
    ``|``, coverage's separator of the two; lines run outside any test have the empty context)."""
    from coverage import CoverageData

    data = CoverageData(basename=str(data_file))
    data.read()
    found: dict[str, set[tuple[str, int]]] = {}
    for filename in data.measured_files():
        relative = os.path.relpath(filename, ROOT) if os.path.isabs(filename) else filename
        for line, contexts in data.contexts_by_lineno(filename).items():
            for context in filter(None, contexts):
                found.setdefault(context, set()).add((relative, line))
    return {test: frozenset(lines) for test, lines in found.items()}


def choose(
    lines: Mapping[str, Lines],
    seconds: Mapping[str, float],
    cheap: float,
    kept: Iterable[str] = (),
    drawn: Iterable[str] = (),
) -> list[str]:
    """The expensive tests the default run can leave out (sorted): a greedy weighted set cover of the
    expensive tests' lines, starting from the lines of the tests that stay anyway (the cheap ones, `kept`
    and those the coverage run attributed no lines to), then a pass dropping picks later picks made
    redundant, most expensive first. `drawn` tests (property tests) stay too, but their lines cover nothing
    for others: the next run draws other examples."""
    drawn = set(drawn)
    expensive = {t for t, s in seconds.items() if s >= cheap and t in lines} - set(kept) - drawn
    covered: set[tuple[str, int]] = set()
    for test in seconds.keys() - expensive - drawn:
        covered |= lines.get(test, frozenset())
    target = set().union(*(lines[t] for t in expensive)) - covered if expensive else set()
    picked: list[str] = []
    while target - covered:
        waiting = sorted(expensive - set(picked))
        picked.append(max(waiting, key=lambda t: len(lines[t] - covered) / max(seconds[t], 0.01)))
        covered |= lines[picked[-1]]
    holders = Counter(line for t in picked for line in lines[t] & target)
    for test in sorted(picked, key=lambda t: (-seconds[t], t)):
        if all(holders[line] > 1 for line in lines[test] & target):
            picked.remove(test)
            holders.subtract(lines[test] & target)
    return sorted(expensive - set(picked))


def written(tests: Iterable[str]) -> str:
    """tests/thorough.txt's text: the header saying where it comes from, then one node id a line."""
    return HEADER + "".join(f"{test}\n" for test in tests)


def listed(path: Path = LIST) -> set[str]:
    """The node ids a list names: tests/thorough.txt, or a coverage run's pinned.txt / random.txt (comments
    and blank lines skipped; no file, no ids)."""
    if not path.exists():
        return set()
    return {s for line in path.read_text().splitlines() if (s := line.strip()) and not s.startswith("#")}


def run_coverage(out: Path) -> int:
    """The default and thorough tests under coverage, each test's lines under its node id (tests/tiers_plugin.py)."""
    shutil.rmtree(out, ignore_errors=True)  # no data of an earlier, aborted run is combined into this one
    out.mkdir(parents=True)
    rc = out / "coveragerc"
    rc.write_text(
        "[run]\nsource = optimizer, querylog, costmodel\nparallel = true\n"
        f"data_file = {out / '.coverage'}\nsigterm = true\npatch = subprocess\n    _exit\n"  # the CLI ends by os._exit
    )
    env = {**os.environ, "COVERAGE_RCFILE": str(rc), "DELTAOPT_TIERS_OUT": str(out)}
    every = "not slow and not matrix"  # the default run and the thorough tier: the list is chosen again from both
    pytest = ["-m", "pytest", "-m", every, "-p", "tests.tiers_plugin", f"--junitxml={out / 'junit.xml'}"]
    status = subprocess.call([sys.executable, "-m", "coverage", "run", f"--rcfile={rc}", *pytest], env=env)
    subprocess.check_call([sys.executable, "-m", "coverage", "combine", f"--rcfile={rc}"], env=env, cwd=out)
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("coverage", help="run the default and thorough tests under coverage")
    run.add_argument("--out", type=Path, default=Path("/tmp/deltaopt-tiers"))
    pick = commands.add_parser("choose", help="write tests/thorough.txt from a coverage run")
    pick.add_argument("data", type=Path, help="the combined coverage data file")
    pick.add_argument("report", type=Path, help="the run's --junitxml report")
    pick.add_argument("--cheap", type=float, default=2.0, help="tests under this many seconds always stay")
    args = parser.parse_args(argv)
    if args.command == "coverage":
        return run_coverage(args.out)
    lines, (seconds, failed) = lines_per_test(args.data), seconds_per_test(args.report)
    pinned, drawn = (args.data.parent / name for name in ("pinned.txt", "random.txt"))
    if missing := [str(path) for path in (pinned, drawn) if not path.exists()]:
        raise SystemExit(
            f"{', '.join(missing)} not found: give the data file of a `python -m tests.tiers coverage` run"
        )
    left_out = choose(lines, seconds, args.cheap, kept=failed | listed(pinned), drawn=listed(drawn))
    LIST.write_text(written(left_out))
    kept = sum(s for t, s in seconds.items() if t not in left_out)
    total = sum(seconds.values())
    print(f"{len(left_out)} of {len(seconds)} tests to the thorough tier; default run {kept:.0f} s of {total:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
