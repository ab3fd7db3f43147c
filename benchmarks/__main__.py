"""``python -m benchmarks NAME [--quick]``: run one benchmark (or ``all``)."""

from __future__ import annotations

import argparse
import importlib

BENCHMARKS = {
    "querylog": "benchmarks.querylog_bench",
    "analyser": "benchmarks.analyser_bench",
}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("name", choices=[*BENCHMARKS, "all"])
    args = parser.parse_args()
    names = list(BENCHMARKS) if args.name == "all" else [args.name]
    for name in names:
        print(f"== {name}")
        importlib.import_module(BENCHMARKS[name]).run()


if __name__ == "__main__":
    main()
