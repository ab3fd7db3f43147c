"""The cost of an OPTIMIZE run, in cluster seconds (thesis 5.1).

The thesis's model is linear in the data size, with a per-GB cost that grows linearly with the number
of Z-order, SOP and additional features:

    seconds = overhead + GB * (base + m_z * n_z + m_sop * n_sop + m_add * n_add)

Coefficients are fitted with scikit-learn (non-negative least squares, so more data or more features
never predict less time) from measured runs (`optimizer.estimate.calibrate`), stored as JSON with the fit
quality; `DEFAULT_MODEL` holds coefficients measured on this project's machines for when no
calibration exists. Benefit is converted into the same unit with ``cost_per_mb_read``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

import numpy as np
from sklearn.linear_model import LinearRegression

from costmodel.errors import CostModelError

GB = 1e9


@dataclass(frozen=True)
class Run:
    """One measured OPTIMIZE: input bytes, feature counts, wall seconds."""

    bytes: int
    z: int
    sop: int
    additional: int
    seconds: float


@dataclass(frozen=True)
class CostEstimate:
    seconds: float
    gigabytes: float
    z: int
    sop: int
    additional: int
    terms: dict[str, float]


@dataclass(frozen=True)
class CostModel:
    overhead: float  # seconds per run
    base: float  # seconds per GB
    per_z: float  # seconds per GB per Z feature
    per_sop: float  # seconds per GB per SOP feature
    per_additional: float  # seconds per GB per additional (statistics-only) feature
    r2: float | None = None
    runs: int = 0
    measured: str = ""  # where and when the runs were measured
    extra: dict[str, object] = field(default_factory=dict)

    def predict(self, bytes_: int, z: int, sop: int, additional: int) -> CostEstimate:
        gigabytes = bytes_ / GB
        terms = {
            "overhead": self.overhead,
            "base": gigabytes * self.base,
            "z": gigabytes * self.per_z * z,
            "sop": gigabytes * self.per_sop * sop,
            "additional": gigabytes * self.per_additional * additional,
        }
        return CostEstimate(
            sum(terms.values()), gigabytes, z, sop, additional, {k: round(v, 4) for k, v in terms.items()}
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    def save(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(self.to_json())


def design(runs: Sequence[Run]) -> tuple[np.ndarray, np.ndarray]:
    """Features [GB, GB*z, GB*sop, GB*add] and targets (seconds) of the linear model."""
    x = np.array([[r.bytes / GB, r.bytes / GB * r.z, r.bytes / GB * r.sop, r.bytes / GB * r.additional] for r in runs])
    y = np.array([r.seconds for r in runs])
    return x, y


def fit(runs: Sequence[Run], measured: str = "") -> CostModel:
    """Least-squares fit with non-negative coefficients. Raises `CostModelError` with too few runs."""
    if len(runs) < 5:
        raise CostModelError(f"need at least 5 measured runs to fit 5 coefficients, got {len(runs)}")
    x, y = design(runs)
    regression = LinearRegression(positive=True).fit(x, y)
    base, per_z, per_sop, per_additional = (float(c) for c in regression.coef_)
    return CostModel(
        overhead=max(float(regression.intercept_), 0.0),
        base=base,
        per_z=per_z,
        per_sop=per_sop,
        per_additional=per_additional,
        r2=float(regression.score(x, y)),
        runs=len(runs),
        measured=measured or datetime.now(UTC).isoformat(timespec="seconds"),
    )


def load(path: str | Path | None = None) -> CostModel:
    """A calibrated model from `path`, or `DEFAULT_MODEL` when there is none. Raises `CostModelError`
    for a file that exists but is not a model."""
    if path is None or not Path(path).exists():
        return DEFAULT_MODEL
    try:
        data = json.loads(Path(path).read_text())
        return CostModel(**data)
    except (OSError, ValueError, TypeError) as err:
        raise CostModelError(f"{path}: not a cost model ({err})") from err


def _default() -> CostModel:
    text = resources.files("costmodel").joinpath("defaults.json").read_text()
    return CostModel(**json.loads(text))


DEFAULT_MODEL = _default()
