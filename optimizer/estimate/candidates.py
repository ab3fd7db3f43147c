"""The layouts the estimate compares for one analysis (the thesis's own future work: let the benefit
estimate pick the features): the analysed layout, its orders and subsets, with the joined features,
and, where deltaopt's own job runs, on a Hilbert curve, with the workload's Z-order bit pattern
(`estimate.workload_bits`) and cut by the workload's tree (`estimate.workload_cuts`). Each is priced by
the same virtual-file estimate (`estimate.layouts.evaluate_layouts`); the best net wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from optimizer.clustering.curves import CURVE_NAMES, HILBERT_MAX_DIMENSIONS
from optimizer.cut_tree import CutTree
from optimizer.features import FeatureSet, JoinedFeature


def candidate_layouts(
    features: FeatureSet,
    joined: Sequence[JoinedFeature] = (),
    *,
    hilbert: bool = True,
    workload_bits: tuple[int, ...] = (),
    cuts: tuple[CutTree | None, CutTree | None] = (None, None),
) -> list[tuple[str, FeatureSet]]:
    """The analysed layout and variants the estimator compares (the thesis's own future work: let the
    benefit estimate pick the features). A feature left out of clustering keeps its statistics.
    With `joined` features, the layouts with them too: added to the analysed layout (in both orders
    where it has SOP features) and to its Z features alone. With `hilbert`, the analysed layout on a
    Hilbert curve too, and with the `workload_bits` pattern (`estimate.workload_bits`) when there is
    one, and cut by the workload's `cuts` trees when there are (leaves as files, leaves as row groups:
    `CutTree.row_group`). Variants keep the analysed layout's curve, not its bit pattern (made for
    its dimensions) nor its cut tree."""
    candidates = [("as analysed", features)] if not features.is_empty else []
    workload_bits = workload_bits if workload_bits != features.precision else ()  # no second "as analysed"
    trees = [
        (name, tree)
        for name, tree in zip(("cut tree", "cut tree, row groups"), cuts, strict=True)
        if tree is not None and tree != features.cuts  # likewise
    ]
    features = replace(features, precision=(), cuts=None)
    if joined:
        candidates.extend(_with_joined(features, tuple(joined)))
    if features.is_empty:
        return candidates
    candidates.extend(_variants(features))
    if hilbert and workload_bits and features.curve == "z":  # Delta's commands cannot write a bit pattern
        candidates.append(("Z-order, workload bits", replace(features, precision=workload_bits)))
    for name, tree in trees if hilbert else ():  # nor cut files by a tree (`estimate.workload_cuts`)
        candidates.append((name, replace(features, cuts=tree, sop_leads=False)))
    if hilbert and features.curve == "z" and 2 <= features.curve_dimensions <= HILBERT_MAX_DIMENSIONS:
        # the same range ids on a curve whose consecutive keys are grid neighbours: each file (and row
        # group) a more compact box with narrower min/max ranges, where a Z-order one can span distant
        # boxes (with one dimension there is no curve: rows are sorted by its value)
        candidates.append((CURVE_NAMES["hilbert"], replace(features, curve="hilbert")))
    # a Hilbert layout given more dimensions (joined features) than its table has is left out
    return [c for c in candidates if c[1].curve == "z" or c[1].curve_dimensions <= HILBERT_MAX_DIMENSIONS]


def _variants(features: FeatureSet) -> list[tuple[str, FeatureSet]]:
    """The analysed layout's other orders and subsets: the SOP id leading, each kind of feature alone,
    and without its last Z feature."""
    candidates: list[tuple[str, FeatureSet]] = []
    if features.z and features.sop:
        if not features.sop_leads:
            candidates.append(("SOP id leading", replace(features, sop_leads=True)))
        z_only = FeatureSet(z=features.z, z_add=features.z_add, sop_add=(*features.sop, *features.sop_add))
        candidates.append(("Z-order only", replace(z_only, curve=features.curve)))
        candidates.append(
            (
                "SOP only",
                FeatureSet(
                    sop=features.sop,
                    sop_add=features.sop_add,
                    z_add=(*features.z, *features.z_add),
                    sop_weights=features.sop_weights,
                    curve=features.curve,
                ),
            )
        )
    if len(features.z) >= 2:
        candidates.append(
            (
                f"without Z feature {features.z[-1].expression}",
                FeatureSet(
                    z=features.z[:-1],
                    sop=features.sop,
                    z_add=(features.z[-1], *features.z_add),
                    sop_add=features.sop_add,
                    sop_weights=features.sop_weights,
                    curve=features.curve,
                ),
            )
        )
    return candidates


def _with_joined(features: FeatureSet, joined: tuple[JoinedFeature, ...]) -> list[tuple[str, FeatureSet]]:
    """The analysed layout with the joined features (in both orders where it has SOP features), its Z
    features with them (SOP features as statistics), each joined feature alone and all of them alone:
    n files cut d dimensions about n^(1/d) times each, so one or two attributes gathered well can beat
    more gathered poorly."""
    names = ", ".join(f"{j.dimension}.{j.attribute}" for j in joined)
    found = [(f"with {names}", replace(features, joined=joined))]
    if features.sop:
        found.append((f"with {names}, SOP id leading", replace(features, joined=joined, sop_leads=True)))
    statistics_only = FeatureSet(
        z_add=(*features.z, *features.z_add), sop_add=(*features.sop, *features.sop_add), joined=joined
    )
    if len(joined) > 1 or not features.is_empty:
        found.extend((f"{j.dimension}.{j.attribute} alone", replace(statistics_only, joined=(j,))) for j in joined)
    if len(joined) > 1 and not features.is_empty:
        found.append((f"{names} alone", statistics_only))  # the attributes only: fewer dimensions, finer cuts
    if features.z and features.sop:
        z_only = FeatureSet(z=features.z, z_add=features.z_add, sop_add=(*features.sop, *features.sop_add))
        found.append((f"Z-order with {names}", replace(z_only, joined=joined)))
    return found
