"""Fixtures of the table tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def delta_spark(spark):
    """The shared session, which must have Delta's engine: these tests commit through it."""
    from optimizer.table.rewrite_path import commit_engine

    if commit_engine(spark) != "delta-spark":
        pytest.fail("the test session has no Delta engine: `make install` caches the jars (optimizer.delta_jars)")
    return spark
