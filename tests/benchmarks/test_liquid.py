"""The liquid benchmark's done-when checks judge the figures they are given (no Spark: a made-up run)."""

from __future__ import annotations

from typing import Any

from benchmarks.liquid_checks import check_bytes, check_estimate, check_key_change, check_stable
from benchmarks.liquid_report import LABELS, render

MB = 1 << 20


def tick(step: int, phase: str, mb: dict[str, float], *, service: dict[str, Any] | None = None) -> dict[str, Any]:
    """A tick where each copy read `mb[copy]` MB per query; (a) spends 2 s per OPTIMIZE."""
    scans = {c: {"standard_column_mb": v, "mb": v, "files": 1.0, "total_files": 4} for c, v in mb.items()}
    idle = {"action": "skip", "reason": "", "liquid": {}, "job": {}, "committed": False, "keys_after": ["k"]}
    idle["tick_seconds"] = 1.0
    return {
        "step": step,
        "phase": phase,
        "load": 1.0,
        "scans": scans,
        "expert": {"optimize": {"seconds": 2.0, "bytes_added": MB}},
        "service": service or idle,
        "deltaopt": {**idle, "keys_after": []},
    }


def key_change(old: list[str], new: list[str], *, estimated: float, before: float, after: float) -> dict[str, Any]:
    """(b)'s committed key change with its estimate and the held-out bytes around it."""
    liquid = {"operation": "AUTO_CLUSTERING_COLUMN_SELECTION", "keys": old, "wanted": new, "reason": "wanted"}
    return {
        "action": "optimize",
        "reason": "wanted",
        "liquid": liquid,
        "job": {"seconds": 1.0, "bytes_out": MB, "run_id": "r1"},
        "committed": True,
        "keys_after": new,
        "tick_seconds": 3.0,
        "benefit": {"bytes_per_query_before": before, "bytes_per_query_after": before - estimated},
        "held_before": {"standard_bytes": before},
        "held_after": {"standard_bytes": after},
    }


def run_of(ticks: list[dict[str, Any]], within: int = 2) -> dict[str, Any]:
    args = {"within": within, "rate": 60.0, "scale": 0.01, "files_per_append": 2, "held_out": 3}
    args |= {"initial": 1, "shift": 2, "stable": 1, "initial_key": "l_linenumber"}
    settings = {"cost_per_mb_read": 1.0, "liquid_key_ticks": 3, "liquid_key_margin": 0.2, "readers": {}}
    return {"args": args, "settings": settings, "ticks": ticks, "increment": MB, "target": MB, "expert_keys": ["k"]}


def test_bytes_check_is_met_only_within_five_percent_of_the_expert_and_with_fewer_seconds():
    close = [tick(1, "initial", {"expert": 1.0, "service": 1.04, "deltaopt": 1.0})]
    far = [tick(1, "initial", {"expert": 1.0, "service": 1.2, "deltaopt": 1.0})]
    assert check_bytes(close)[0] == "met"
    status, said = check_bytes(far)
    assert status == "not met" and "1.20x" in said


def test_a_key_change_counts_from_the_shift_and_needs_a_positive_realised_net():
    mb = {"expert": 1.0, "service": 1.0, "deltaopt": 1.0}
    change = key_change(["a"], ["b"], estimated=0.5 * MB, before=2.0 * MB, after=1.6 * MB)
    ticks = [tick(1, "initial", mb), tick(2, "shift", mb), tick(3, "shift", mb, service=change), tick(4, "stable", mb)]
    status, said = check_key_change(run_of(ticks, within=2))
    assert status == "met" and "2nd tick after the shift" in said
    assert check_key_change(run_of(ticks, within=1))[0] == "not met"
    loses = key_change(["a"], ["b"], estimated=0.5 * MB, before=2.0 * MB, after=2.5 * MB)
    ticks[2] = tick(3, "shift", mb, service=loses)
    assert check_key_change(run_of(ticks, within=2))[0] == "not met"


def test_stable_phase_and_estimate_checks_report_what_ran():
    mb = {"expert": 1.0, "service": 1.0, "deltaopt": 1.0}
    change = key_change(["a"], ["b"], estimated=0.5 * MB, before=2.0 * MB, after=1.6 * MB)
    quiet = run_of([tick(1, "stable", mb)])
    assert check_stable(quiet)[0] == "not shown"  # 1 of the 20 ticks the issue asks
    assert check_stable(run_of([tick(1, "stable", mb, service=change)]))[0] == "not met"
    far = key_change(["a"], ["b"], estimated=0.6 * MB, before=2.0 * MB, after=1.6 * MB)
    status, said = check_estimate([tick(1, "shift", mb, service=far)])
    assert status == "not met" and "(1.50x)" in said  # 0.6 MB estimated vs 0.4 realised
    close = key_change(["a"], ["b"], estimated=0.45 * MB, before=2.0 * MB, after=1.6 * MB)
    assert check_estimate([tick(1, "shift", mb, service=close)])[0] == "met"
    report = render(run_of([tick(1, "initial", mb), tick(2, "shift", mb, service=change)]))
    assert all(label in report for label in LABELS.values()) and "(a) -> (b)" in report
