"""A table's estimate-to-realised correction (`costmodel.benefit.realised_factor`, `calibrated`): the factor
its next benefits are scaled by, from the running sums of what its jobs' estimates expected and what
they realised on the scans after them."""

from __future__ import annotations

import pytest

from costmodel.benefit import CALIBRATION_BOUNDS, BenefitEstimate, Calibration, calibrated, realised_factor


def benefit(value: float) -> BenefitEstimate:
    return BenefitEstimate(10, 70.0, 8e6, 2e6, 10e6, 6.0, value, 5000, 4, 0.1, benefit_skipping=value)


@pytest.mark.parametrize("jobs", [0, 1, 2])
def test_no_factor_before_the_minimum_of_jobs_was_measured(jobs: int):
    assert realised_factor(10.0, 5.0, jobs, min_jobs=3) is None


def test_the_factor_is_realised_over_estimated_the_inverse_of_the_ratio():
    estimated, realised = 12.0, 7.5
    factor = realised_factor(estimated, realised, 3, min_jobs=3)
    assert factor == pytest.approx(1 / (estimated / realised), abs=1e-4)
    assert realised_factor(estimated, realised, 40, min_jobs=3) == factor  # more jobs: the same sums, same factor


@pytest.mark.parametrize(
    ("estimated", "realised", "bound"),
    [
        (10.0, 0.1, 0),  # the estimates were 100x too high: clamped, not silenced
        (10.0, -3.0, 0),  # the jobs made reads worse
        (0.5, 20.0, 1),  # 40x too low: clamped, not forced
    ],
)
def test_the_factor_is_clamped_at_both_ends(estimated: float, realised: float, bound: int):
    assert realised_factor(estimated, realised, 5, min_jobs=3) == CALIBRATION_BOUNDS[bound]


def test_zero_jobs_turns_it_off_and_an_estimate_of_no_saving_gives_none():
    assert realised_factor(10.0, 5.0, 50, min_jobs=0) is None
    assert realised_factor(0.0, 5.0, 50, min_jobs=3) is None


def test_a_calibrated_benefit_keeps_the_raw_figure_and_its_record_says_so():
    raw = benefit(15.4)
    scaled = calibrated(raw, Calibration(0.62, 5))
    assert scaled.benefit == round(15.4 * 0.62, 4) and scaled.raw_benefit == 15.4
    assert scaled.benefit_skipping == raw.benefit_skipping  # the parts stay the estimate's own
    assert scaled.as_dict()["calibration"] == {"factor": 0.62, "jobs": 5, "raw_benefit": 15.4}
    assert calibrated(scaled, Calibration(0.62, 5)) == scaled  # scaling a scaled benefit again changes nothing
    assert calibrated(raw, None) is raw
    assert "calibration" not in raw.as_dict()  # records made without a factor keep their keys


@pytest.mark.parametrize(
    ("estimated", "realised"),
    [
        (float("nan"), 5.0),  # a state file's sum that is not a number
        (10.0, float("nan")),
        (float("inf"), 5.0),  # would clamp to 0.25 as if the jobs had realised nothing
        (10.0, float("inf")),  # would clamp to 4 as if they had realised 40x
        (float("inf"), float("inf")),
    ],
)
def test_a_sum_that_is_not_a_finite_number_gives_no_factor(estimated: float, realised: float):
    """A factor of nan would make every benefit nan, and every verdict a skip whatever the figures."""
    assert realised_factor(estimated, realised, 5, min_jobs=3) is None
