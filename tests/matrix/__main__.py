"""``make test-matrix``: the smoke suite (tests/matrix) on every supported Spark/Delta pair, one venv each.

Each pair gets its own environment under ``.matrix/<pair>`` (kept between runs, rebuilt when
pyproject.toml changes), built the way a user with that Spark installs deltaopt: PySpark first, then plain
``pip install deltaopt`` (checked to leave that PySpark in place), then the pair's extra, the pair's
``delta-spark`` and the test tools; Delta's jars are fetched for that PySpark by ``python -m
optimizer.delta_jars``. The default pair runs in the project's own ``.venv`` (``make install``). The
smoke suite then runs there against tables that pair's Delta makes, and the outcome of every test on every
pair is written as a table to docs/MATRIX.md.

Only the standard library here: this runs under the system Python, before any environment exists.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from optimizer import store_jars

ROOT = Path(__file__).resolve().parents[2]
SUITE = (
    "tests/matrix",
    "tests/test_spark_versions.py",
    "tests/table/test_delta_adapter.py",
    "tests/test_cli_jvm_errors.py",
    "tests/clusters/test_object_storage.py",  # the S3A connector of the pair's Hadoop, against a local S3 server
)
REPORT = ROOT / "docs" / "MATRIX.md"


@dataclass(frozen=True)
class Pair:
    """One supported Spark/Delta pair: the PySpark and delta-spark releases installed, the extra naming it."""

    pyspark: str
    delta: str
    extra: str

    @property
    def name(self) -> str:
        return f"spark-{self.pyspark}-delta-{self.delta}"


PAIRS = (
    Pair("3.5.9", "3.2.1", "spark35"),
    Pair("3.5.9", "3.3.3", "spark35"),
    Pair("4.0.5", "4.0.1", "embedded"),
    Pair("4.1.1", "4.2.0", "spark41"),
    Pair("4.1.1", "4.3.1", "spark41"),
    Pair("4.2.0", "4.4.0", "spark42"),
)
DEFAULT = PAIRS[2]  # the project's own .venv (`make install`)


def _own_env(**extra: str) -> dict[str, str]:
    """This process's environment without what would make a pair's environment use another's: each one
    fetches and reads its own jar cache (`optimizer.delta_jars`), and runs Python workers of its own."""
    env = {k: v for k, v in os.environ.items() if k not in ("DELTAOPT_DELTA_JARS", "PYSPARK_PYTHON", "VIRTUAL_ENV")}
    return {**env, **extra}


def _run(command: list[str], log: Path, env: dict[str, str] | None = None) -> int:
    """Run `command` from the repository root, its output appended to `log`; the exit code."""
    env = env if env is not None else _own_env()
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(command)}\n")
        out.flush()
        return subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env, check=False).returncode


def _installed(python: Path, name: str) -> str:
    code = f"from importlib.metadata import version; print(version({name!r}))"
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    return done.stdout.strip() or f"(not installed: {done.stderr.strip().splitlines()[-1:]})"


class BuildError(RuntimeError):
    """A pair's environment could not be built as a user would build it."""


def build(pair: Pair, log: Path) -> Path:
    """The pair's environment (its Python), built unless one for this pyproject.toml exists."""
    if pair == DEFAULT:
        venv = ROOT / ".venv"
        if _run(["make", "install"], log) != 0:
            raise BuildError("make install failed")
        return venv / "bin" / "python"
    venv = ROOT / ".matrix" / pair.name
    python = venv / "bin" / "python"
    stamp = venv / f".built-{hashlib.sha256((ROOT / 'pyproject.toml').read_bytes()).hexdigest()[:12]}"
    if stamp.is_file():
        return python
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(venv)],
        [str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
        [str(python), "-m", "pip", "install", "--quiet", f"pyspark=={pair.pyspark}"],  # the user's Spark
        [str(python), "-m", "pip", "install", "--quiet", "-e", "."],  # plain deltaopt: must keep it
    ]
    for step in steps:
        if _run(step, log) != 0:
            raise BuildError(f"failed: {' '.join(step)}")
    kept = _installed(python, "pyspark")
    if kept != pair.pyspark:
        raise BuildError(f"`pip install deltaopt` replaced PySpark {pair.pyspark} with {kept}")
    extras = f".[{pair.extra},dev]"
    step = [str(python), "-m", "pip", "install", "--quiet", "-e", extras, f"delta-spark=={pair.delta}"]
    if _run(step, log) != 0:
        raise BuildError(f"failed: {' '.join(step)}")
    if _installed(python, "pyspark") != pair.pyspark:
        raise BuildError(f"`pip install -e {extras}` replaced PySpark {pair.pyspark}")
    # Delta's jars and the S3A connector, cached before any test
    for fetch in ([str(python), "-m", "optimizer.delta_jars"], store_jars.fetch_command("s3a", str(python))):
        if _run(fetch, log) != 0:
            raise BuildError(f"{' '.join(fetch)} failed")
    stamp.touch()
    return python


@dataclass
class Outcome:
    """What the smoke suite did on one pair."""

    pair: Pair
    tests: dict[str, str]  # test id -> passed | failed | skipped | error (a skipped smoke test is not a pass)
    seconds: float
    problem: str = ""

    @property
    def passed(self) -> bool:
        return not self.problem and bool(self.tests) and all(v == "passed" for v in self.tests.values())


def _junit(path: Path) -> dict[str, str]:
    outcomes: dict[str, str] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '').split('.')[-1]}::{case.get('name')}"
        kinds = {child.tag for child in case}
        outcomes[name] = next((k for k in ("failure", "error", "skipped") if k in kinds), "passed")
        outcomes[name] = {"failure": "failed"}.get(outcomes[name], outcomes[name])
    return outcomes


def smoke(pair: Pair, python: Path, log: Path, extra_args: list[str]) -> Outcome:
    """Run the smoke suite with `python`, on the pair it was built for."""
    junit = ROOT / ".matrix" / f"{pair.name}.xml"
    junit.unlink(missing_ok=True)
    env = _own_env(DELTAOPT_MATRIX_PAIR=f"{pair.pyspark}/{pair.delta}", PYSPARK_PYTHON=str(python))
    command = [str(python), "-m", "pytest", *SUITE, "-m", "not slow", "-p", "no:cacheprovider", "-q"]
    started = time.monotonic()
    code = _run([*command, f"--junitxml={junit}", *extra_args], log, env)
    seconds = time.monotonic() - started
    tests = _junit(junit) if junit.is_file() else {}
    problem = "" if tests else f"pytest exited {code} before running a test (see {log.relative_to(ROOT)})"
    if tests and code != 0 and all(v == "passed" for v in tests.values()):
        problem = f"pytest exited {code} although every test it reported passed (see {log.relative_to(ROOT)})"
    return Outcome(pair, tests, seconds, problem)


def report(outcomes: list[Outcome]) -> str:
    """docs/MATRIX.md: one column per pair, one row per test."""
    names = sorted({name for o in outcomes for name in o.tests})
    head = "| test | " + " | ".join(f"Spark {o.pair.pyspark} + Delta {o.pair.delta}" for o in outcomes) + " |"
    lines = [
        "# Supported Spark/Delta pairs: the smoke suite on each",
        "",
        f"Written by `make test-matrix` (tests/matrix/__main__.py) on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; "
        "what each pair covers and why is in docs/VERSIONS.md. Each environment was built as a user with that "
        "Spark builds one: PySpark first, then plain `pip install deltaopt` (the build fails if that replaced "
        "PySpark), then the pair's extra and delta-spark; Delta's jars and the S3A connector cached for that PySpark.",
        "",
        head,
        "|---" * (len(outcomes) + 1) + "|",
    ]
    for name in names:
        lines.append(f"| `{name}` | " + " | ".join(o.tests.get(name, "-") for o in outcomes) + " |")
    lines.append("| **pair** | " + " | ".join(_verdict(o) for o in outcomes) + " |")
    lines.append("| seconds | " + " | ".join(f"{o.seconds:.0f}" for o in outcomes) + " |")
    return "\n".join(lines) + "\n"


def _verdict(outcome: Outcome) -> str:
    if outcome.problem:
        return f"**not run**: {outcome.problem}"
    return "**passed**" if outcome.passed else "**FAILED**"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.matrix", description=__doc__.splitlines()[0])
    parser.add_argument("--pair", action="append", help="only these pairs (e.g. spark-3.5.9-delta-3.2.1)")
    parser.add_argument("--no-report", action="store_true", help="do not rewrite docs/MATRIX.md")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.pair or ()) - {p.name for p in PAIRS})
    if unknown:
        parser.error(f"unknown pair(s) {', '.join(unknown)}; the pairs: {', '.join(p.name for p in PAIRS)}")
    chosen = [p for p in PAIRS if not args.pair or p.name in args.pair]
    (ROOT / ".matrix").mkdir(exist_ok=True)
    outcomes = []
    for pair in chosen:
        log = ROOT / ".matrix" / f"{pair.name}.log"
        log.write_text(f"{pair.name}: {datetime.now(UTC).isoformat()}\n")
        print(f"== {pair.name}: building ({log.relative_to(ROOT)})", flush=True)
        try:
            python = build(pair, log)
        except BuildError as err:
            outcomes.append(Outcome(pair, {}, 0.0, str(err)))
        else:
            print(f"== {pair.name}: smoke suite", flush=True)
            outcomes.append(smoke(pair, python, log, args.pytest_args))
        print(f"== {pair.name}: {_verdict(outcomes[-1])} in {outcomes[-1].seconds:.0f} s", flush=True)
        if not outcomes[-1].passed:  # what failed, where a CI log shows it
            print("\n".join(log.read_text().splitlines()[-80:]), flush=True)
    text = report(outcomes)
    print(text)
    if not args.no_report and len(chosen) == len(PAIRS):
        REPORT.write_text(text)
    return 0 if all(o.passed for o in outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
