"""Hypothesis settings of the soundness properties: the default tier and the slow tier
(`make test-slow`, marked ``slow``), so every property runs the same example counts."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

DEFAULT_TIER = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW_TIER = settings(max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
