"""Which chosen features stand for dimension filters: the decision record's answer to "why is this
fact table clustered on a join key?".

A join-derived filter in the log (`querylog.records.DerivedFilter`) names the dimension filter it
stands for. A Z feature came from joins when derived filters compare its expression (as the workload
summary reads it, `workload.z_shape_of`); a SOP feature when it is itself a derived filter.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from optimizer.analysis.workload import z_shape_of
from querylog.errors import QueryLogError
from querylog.records import ScanRecord

MAX_SHOWN = 5  # dimension filters listed per feature, the most frequent first


def join_sources(records: Iterable[ScanRecord], features: Iterable[str]) -> dict[str, dict[str, object]]:
    """{feature: {"scans": n, "via": [dimension filters, most frequent first]}} for each of
    `features` (Z expressions or SOP predicates) that join-derived filters in `records` stand behind."""
    sources: dict[str, Counter[str]] = {}
    scans: Counter[str] = Counter()
    for record in records:
        touched: set[str] = set()
        for derived in record.derived:
            try:
                shape = z_shape_of(derived.filter)  # the analyser's own reading of a filter
            except QueryLogError:
                continue
            for name in {derived.filter, *([shape.expression] if shape else [])}:
                sources.setdefault(name, Counter())[derived.via] += 1
                touched.add(name)
        scans.update(touched)
    return {
        feature: {"scans": scans[feature], "via": [v for v, _ in sources[feature].most_common(MAX_SHOWN)]}
        for feature in features
        if feature in sources
    }
