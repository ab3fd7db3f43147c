"""Clustering features: the records that travel from the analyser to the clustering job and the
estimator (docs/ARCHITECTURE.md, contract 1).

A Z feature is a deterministic scalar expression over one column (a column, or ``MONTH(l_shipdate)``,
``props['k']``, ...) compared with literals; a SOP feature is a whole boolean predicate. Both are
kept as canonical Spark SQL text produced by `querylog.predicates.normalize`; sqlglot trees are
re-parsed from that text where needed. A joined feature is a column of a dimension table reached
through the fact table's join key (``part.p_brand`` through ``l_partkey``): one more Z dimension,
looked up by a join when rows are laid out (`optimizer.clustering.joined`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Literal, cast

from optimizer.cut_tree import MAX_DEPTH, MAX_LEAVES, CutTree, parse_tree
from optimizer.errors import FeatureError
from querylog.errors import QueryLogError
from querylog.predicates.classify import column_names
from querylog.predicates.normalize import parse_canonical


@dataclass(frozen=True)
class ZFeature:
    expression: str

    @property
    def is_plain_column(self) -> bool:
        return self.expression == self.column and "." not in self.expression and "[" not in self.expression

    @property
    def column(self) -> str:
        names = column_names(parse_canonical(self.expression))
        return names[0] if names else self.expression


@dataclass(frozen=True)
class SopFeature:
    predicate: str


@dataclass(frozen=True)
class JoinedFeature:
    """`attribute` of the dimension table at `location` (named `dimension`), for the fact rows whose
    `fact_column` equals its `key`. Files record no statistics of it (it is not stored): readers skip by
    the key sets kept for `fact_column`, which stay true whatever later happens to the dimension."""

    fact_column: str
    dimension: str
    location: str
    key: str
    attribute: str

    @property
    def helper(self) -> str:
        """The column the attribute is looked up into while rows are laid out or estimated (and the
        name the estimate's replay states the dimension filters on)."""
        return joined_helper(self.fact_column, self.dimension, self.attribute)

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def joined_helper(fact_column: str, dimension: str, attribute: str) -> str:
    """``__j_<fact column>_<dimension>_<attribute>``, lower-cased, non-identifier characters as ``_``."""
    text = f"__j_{fact_column}_{dimension}_{attribute}".lower()
    return "".join(c if c.isalnum() or c == "_" else "_" for c in text)


Curve = Literal["z", "hilbert"]  # how the dimensions' range ids become one order (`clustering.curves`)
CURVES: tuple[Curve, ...] = ("z", "hilbert")


@dataclass(frozen=True)
class FeatureSet:
    """What to cluster on (`z`, `sop`) and what to keep statistics for (`z_add`, `sop_add`)."""

    z: tuple[ZFeature, ...] = ()
    sop: tuple[SopFeature, ...] = ()
    z_add: tuple[ZFeature, ...] = ()
    sop_add: tuple[SopFeature, ...] = ()
    sop_weights: Mapping[str, float] = field(default_factory=dict)  # predicate -> workload weight
    sop_leads: bool = False  # files cut by SOP id first, Z-order within (not the SOP id as a Z dimension)
    joined: tuple[JoinedFeature, ...] = ()  # dimension attributes, Z dimensions after `z`
    curve: Curve = "z"  # the order over the dimensions: Z-order, or a Hilbert curve
    # Z-order's bit pattern: the dimension (index in curve order) of each leading key bit, most significant
    # first; empty: the bits interleaved round-robin (`clustering.curves.key_bit_order`)
    precision: tuple[int, ...] = ()
    # a cut tree over plain columns (`clustering.cuts`): files never mix its file cuts' leaves, its row-group
    # cuts' leaves lead the order within them, the curve orders each leaf
    cuts: CutTree | None = None

    def __post_init__(self) -> None:
        """A malformed bit pattern is refused where the feature set is made (read from a record or
        --features-json, or derived from another): one clear line, before any work."""
        if self.precision:
            _check_precision(self.precision, self.curve, self.curve_dimensions)
        if self.cuts is not None:
            _check_cuts(self.cuts, self)

    @property
    def is_empty(self) -> bool:
        return not (self.z or self.sop or self.joined)

    @property
    def curve_dimensions(self) -> int:
        """How many dimensions the curve orders (`clustering.layout`): the Z and joined features, and the
        SOP id unless it leads the order (it leads only where there are others to order within it)."""
        others = len(self.z) + len(self.joined)
        sop_dimension = bool(self.sop) and not (self.sop_leads and others > 0)
        return others + int(sop_dimension)

    def weight(self, feature: SopFeature) -> float:
        return float(self.sop_weights.get(feature.predicate, 1.0))

    def as_dict(self) -> dict[str, object]:
        document: dict[str, object] = {
            "z": [f.expression for f in self.z],
            "sop": [f.predicate for f in self.sop],
            "z_add": [f.expression for f in self.z_add],
            "sop_add": [f.predicate for f in self.sop_add],
            "sop_weights": dict(self.sop_weights),
        }
        if self.sop_leads:  # absent when false: records and indexes written before it read the same
            document["sop_leads"] = True
        if self.joined:  # likewise absent when there are none
            document["joined"] = [j.as_dict() for j in self.joined]
        if self.curve != "z":  # likewise absent for Z-order
            document["curve"] = self.curve
        if self.precision:  # likewise absent for round-robin bits
            document["precision"] = list(self.precision)
        if self.cuts is not None:  # likewise absent without a cut tree
            document["cuts"] = self.cuts.as_json()
        return document

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> FeatureSet:
        def items(key: str) -> list[str]:
            value = data.get(key) or []
            return [str(v) for v in value] if isinstance(value, list | tuple) else []

        weights = data.get("sop_weights") or {}
        joined = data.get("joined") or []
        return cls(
            z=tuple(ZFeature(e) for e in items("z")),
            sop=tuple(SopFeature(p) for p in items("sop")),
            z_add=tuple(ZFeature(e) for e in items("z_add")),
            sop_add=tuple(SopFeature(p) for p in items("sop_add")),
            sop_weights={str(k): float(v) for k, v in weights.items()} if isinstance(weights, Mapping) else {},
            sop_leads=data.get("sop_leads") is True,
            curve=_curve(data.get("curve")),
            precision=_precision(data.get("precision")),
            cuts=parse_tree(data["cuts"]) if data.get("cuts") is not None else None,
            joined=tuple(
                JoinedFeature(**{k: str(j[k]) for k in _JOINED_FIELDS})
                for j in (joined if isinstance(joined, list) else [])
                if isinstance(j, Mapping) and all(k in j for k in _JOINED_FIELDS)
            ),
        )


_JOINED_FIELDS = tuple(f.name for f in fields(JoinedFeature))


def _curve(value: object) -> Curve:
    """A recorded curve: absent (records before curves) is Z-order. A name this version does not know
    (a record of a newer deltaopt, a typo in --features-json) is refused in one line: read as Z-order, the
    files' layout would be misdescribed and a re-layout would silently use another curve."""
    if value is None:
        return "z"
    if value not in CURVES:
        raise FeatureError(f"unknown curve {value!r} in the feature set: expected one of {', '.join(CURVES)}")
    return cast(Curve, value)


KEY_BITS = 63  # a curve's key is a non-negative long (`clustering.curves.KEY_BITS`)
DIMENSION_BITS = 11  # the most bits a dimension's range ids take: ids 0..1024 (`clustering.zorder.MAX_RANGES`)


def _precision(value: object) -> tuple[int, ...]:
    """A recorded bit pattern: absent (records before it) is round-robin; anything but a list of
    dimension indexes is refused in one line."""
    if value is None:
        return ()
    if not isinstance(value, list | tuple) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise FeatureError(f"malformed bit pattern {value!r} in the feature set: expected a list of dimension indexes")
    return tuple(value)


def _check_precision(pattern: tuple[int, ...], curve: Curve, dimensions: int) -> None:
    """Refuse a bit pattern no Z key can follow: on a Hilbert curve (every dimension needs the same levels
    there), over fewer than two dimensions (one is sorted by its value), naming a dimension the layout
    does not have, giving a dimension more bits than range ids take, or longer than a key."""
    if curve != "z":
        raise FeatureError(
            f"a bit pattern (precision) applies to Z-order only: the {curve} curve gives every dimension equal levels"
        )
    if dimensions < 2:
        raise FeatureError(
            f"a bit pattern (precision) needs two or more curve dimensions; this layout has {dimensions}"
        )
    wrong = sorted({i for i in pattern if not 0 <= i < dimensions})
    if wrong:
        raise FeatureError(
            f"bit pattern names dimension(s) {wrong}: the layout's curve has dimensions 0..{dimensions - 1}"
        )
    crowded = sorted(i for i in set(pattern) if pattern.count(i) > DIMENSION_BITS)
    if crowded:
        raise FeatureError(
            f"bit pattern gives dimension(s) {crowded} more than the {DIMENSION_BITS} bits a dimension's range ids have"
        )
    if len(pattern) > KEY_BITS:
        raise FeatureError(f"bit pattern of {len(pattern)} bits: at most {KEY_BITS} fit in a long")


def _plain_column(text: str) -> bool:
    """Whether `text` names one top-level column (no expression, no field of a struct)."""
    try:
        return ZFeature(text).is_plain_column
    except QueryLogError:
        return False


def _check_cuts(tree: CutTree, features: FeatureSet) -> None:
    """Refuse a cut tree the job cannot write as described: one of a single leaf (it cuts nothing), one
    cutting anything but a plain top-level column (the workload's comparison points on Z columns, and on
    the other columns it compares with literals, its recurring predicates' included: `key_columns` gives
    them all min/max), one of more leaves than deltaopt builds, or one with the SOP id leading (both would
    lead the file order; within a leaf the SOP id stays a curve dimension)."""
    if tree.is_leaf:
        raise FeatureError("a cut tree of a single leaf in the feature set: it cuts nothing")
    if tree.leaves > MAX_LEAVES:  # the job would nest a CASE branch per leaf: none deltaopt builds is larger
        raise FeatureError(f"a cut tree of {tree.leaves} leaves in the feature set: at most {MAX_LEAVES}")
    if tree.depth > MAX_DEPTH:  # as its record would be refused (`parse_tree`)
        raise FeatureError(f"cut tree deeper than {MAX_DEPTH} levels in the feature set")
    if not tree.well_nested:  # as in its record: the job would let files mix a file cut's leaves
        raise FeatureError("malformed cut tree in the feature set: a file cut under a row-group cut")
    alien = [c for c in tree.columns if not _plain_column(c)]
    if alien:
        raise FeatureError(f"the cut tree cuts {alien}: a cut tree cuts plain columns only")
    if features.sop_leads:
        raise FeatureError("a cut tree and the SOP id leading cannot combine: both would lead the file order")
