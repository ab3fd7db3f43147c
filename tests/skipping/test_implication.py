"""Implication between canonical predicates (what lets a SOP bit skip files for a query that is not
the feature's own text): golden cases in fixtures/skipping/implication.txt, one claim each."""

from __future__ import annotations

import pytest

from optimizer.skipping.implication import implies
from querylog.predicates.normalize import parse_canonical
from tests.golden import load_cases


@pytest.mark.parametrize("case", load_cases("skipping/implication.txt"), ids=lambda c: c.title)
def test_implication_cases(case):
    feature = case.meta["feature"]
    (expected,) = case.expected
    types = dict(t.split(":") for t in case.meta["types"].split()) if "types" in case.meta else None
    answer = implies(parse_canonical(case.source), parse_canonical(feature), types=types)
    assert ("implies" if answer else "does not imply") == expected, f"{case.source!r} => {feature!r}"
