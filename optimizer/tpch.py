"""TPC-H data for the demo, tests and benchmarks, generated offline by ``tpchgen-cli``.

Generating lineitem in parts (``--parts N --part k``) gives natural increments of "new data arriving"
for the service: each part is a disjoint slice of the same table.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from optimizer.errors import DeltaOptError


def tpchgen_binary() -> str:
    """The tpchgen-cli executable: on PATH or next to this interpreter (a venv's bin/)."""
    found = shutil.which("tpchgen-cli") or shutil.which("tpchgen-cli", path=str(Path(sys.executable).parent))
    if not found:
        raise DeltaOptError("tpchgen-cli is not installed: pip install 'deltaopt[demo]'")
    return found


def generate(table: str, scale: float, out_dir: Path, parts: int = 1, part: int | None = None) -> list[Path]:
    """Write TPC-H `table` as Parquet under `out_dir`; returns the files written (one per part)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    command = [tpchgen_binary(), "parquet", "-s", str(scale), "-o", str(out_dir), "--tables", table]
    if parts > 1:
        command += ["--parts", str(parts)]
        if part is not None:
            command += ["--part", str(part)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise DeltaOptError(f"tpchgen-cli failed ({result.returncode}): {result.stderr.strip()[-500:]}")
    if parts > 1:
        return sorted((out_dir / table).glob(f"{table}.*.parquet"))
    return [out_dir / f"{table}.parquet"]
