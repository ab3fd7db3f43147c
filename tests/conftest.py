"""Shared fixtures. One SparkSession for the whole run: JVM start-up dominates (docs/ARCHITECTURE.md)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("PYSPARK_PYTHON", os.sys.executable)  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from optimizer.config import SparkSettings
    from optimizer.runtime import build_session

    # Delta rebuilds a snapshot's state with 50 tasks by default (sized for clusters); the tests' tables have
    # a few files each, so 2 tasks do the same work with less scheduling (measured: about 7% off Delta-heavy tests).
    tuned = {"spark.databricks.delta.snapshotPartitions": "2"}
    settings = SparkSettings(master="local[2]", shuffle_partitions=4, app_name="deltaopt-tests", conf=tuned)
    session = build_session(settings)
    yield session
    session.stop()


@pytest.fixture(scope="session", autouse=True)
def _template_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The run's directory of template tables (`tests.templates.copy_of`: built once, copied per test)."""
    from tests import templates

    templates.use_root(tmp_path_factory.mktemp("templates"))
    yield
    templates.use_root(None)


@pytest.fixture
def table_path(tmp_path: Path) -> str:
    return str(tmp_path / "table")
