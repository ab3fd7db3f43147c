"""A pytest plugin for `python -m tests.tiers coverage`: the lines each test runs are recorded under its node
id, in the pytest process (a dynamic coverage context) and in the Python processes the test starts (coverage
starts them from the configuration in the environment, which this plugin gives the test's id as their static
context before each test; tests/tiers.py writes the configuration). The tests marked `every_change` and the
property tests are listed beside the data (``pinned.txt``, ``random.txt``): they stay in the default run."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

CONFIG = "COVERAGE_PROCESS_CONFIG"  # what coverage's subprocess patch hands each child (base64 of JSON)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Lists the tests that stay whatever their lines: the pinned ones, and the property tests, whose lines
    change with the examples drawn (a rare branch one run's draw reaches is no reason to drop a test)."""
    out = os.environ.get("DELTAOPT_TIERS_OUT")
    if out:
        pinned = [item.nodeid for item in items if item.get_closest_marker("every_change")]
        drawn = [item.nodeid for item in items if getattr(getattr(item, "obj", None), "is_hypothesis_test", False)]
        for name, tests in (("pinned.txt", pinned), ("random.txt", drawn)):
            (Path(out) / name).write_text("".join(f"{test}\n" for test in sorted(tests)))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    import coverage

    current = coverage.Coverage.current()
    if current is not None:
        current.switch_context(item.nodeid)
    if CONFIG in os.environ:
        config = json.loads(base64.b64decode(os.environ[CONFIG]))
        config["context"] = item.nodeid
        os.environ[CONFIG] = base64.b64encode(json.dumps(config).encode()).decode()
