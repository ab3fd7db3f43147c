"""A Spark setting changed for one block of a test (a session time zone, a Delta flag), put back after."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def session_conf(spark, key: str, value: str) -> Iterator[None]:
    """`spark`'s setting `key` set to `value` for the block, restored (or unset) afterwards: the tests share
    one session, so a setting left behind would change every later test."""
    previous = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)
