"""Value types the configuration accepts, and its strict base model.

Sizes are integers (bytes) or strings such as ``"128MiB"``/``"1GB"``; durations are seconds or strings
such as ``"90s"``, ``"5m"``, ``"7d"``. Every model is frozen and forbids unknown keys, so a typo fails at
load time.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

__all__ = ["ByteSize", "Duration", "LiquidMode", "parse_duration", "parse_size"]

_SIZE_UNITS: dict[str, float] = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_DURATION_UNITS: dict[str, float] = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def _amount(value: Any, units: dict[str, float], example: str) -> tuple[float, str]:
    """The number and the (lower-case, possibly empty) unit of a string like ``"128MiB"``."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(value))
    unit = match.group(2).lower() if match else ""
    if isinstance(value, bool) or not match or (unit and unit not in units):
        raise ValueError(f"expected {example}, units {sorted(units)}")
    return float(match.group(1)), unit


def parse_size(value: Any) -> int:
    """Bytes from an int or a string like ``"128MiB"`` (decimal and binary units)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    number, unit = _amount(value, _SIZE_UNITS, "a size such as 134217728 or '128MiB'")
    return int(number * _SIZE_UNITS.get(unit, 1))


def parse_duration(value: Any) -> float:
    """Seconds from a number or a string like ``"5m"``/``"7d"``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    number, unit = _amount(value, _DURATION_UNITS, "a duration such as 300 or '5m'")
    return number * _DURATION_UNITS.get(unit or "s", 1)


ByteSize = Annotated[int, BeforeValidator(parse_size), Field(ge=0)]
Duration = Annotated[float, BeforeValidator(parse_duration), Field(ge=0)]
# What deltaopt may do with a liquid table's clustering keys, which are the user's choice: keep them (run
# Delta's OPTIMIZE by them), only suggest the workload's, or set the workload's (`clustering.by_delta`).
LiquidMode = Literal["keep", "suggest", "set"]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
