"""``python -m benchmarks NAME [options]``: run one benchmark (or ``all`` with defaults)."""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = {
    "querylog": "benchmarks.querylog_bench",
    "analyser": "benchmarks.analyser_bench",
    "layouts": "benchmarks.layout_bench",
    "estimator": "benchmarks.estimator_bench",
    "flow": "benchmarks.flow_bench",
    "files": "benchmarks.files_bench",
    "drift": "benchmarks.drift_bench",
    "readers": "benchmarks.readers_bench",
    "replay": "benchmarks.replay_bench",
    "overhead": "benchmarks.overhead_bench",
    "tpcds": "benchmarks.tpcds_bench",
    "star": "benchmarks.star_bench",
    "star-import": "benchmarks.star_import",
    "bloom": "benchmarks.bloom_bench",
    "star-flow": "benchmarks.star_flow",
    "idle": "benchmarks.idle_bench",
    "fleet": "benchmarks.fleet_bench",
    "races": "benchmarks.races",
    "rewrite-speed": "benchmarks.rewrite_speed",
    "liquid": "benchmarks.liquid_bench",
    "race-offline": "benchmarks.race_offline",
}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in (*BENCHMARKS, "all"):
        print(f"usage: python -m benchmarks {{{','.join([*BENCHMARKS, 'all'])}}} [options]", file=sys.stderr)
        sys.exit(2)
    names = list(BENCHMARKS) if sys.argv[1] == "all" else [sys.argv[1]]
    for name in names:
        print(f"== {name}")
        module = importlib.import_module(BENCHMARKS[name])
        if hasattr(module, "main"):
            module.main(sys.argv[2:] if len(names) == 1 else [])
        else:
            module.run()


if __name__ == "__main__":
    main()
