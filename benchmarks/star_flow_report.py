"""The star flow's report: per tick each service's action and every copy's bytes per held-out query,
each service's decisions with its joined candidates' explanations, and the final state per family."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from benchmarks import kept_share
from benchmarks.common import table
from benchmarks.kept_share import KeptOverBound
from benchmarks.star_flow_setup import HELD_OUT, SERVICES
from costmodel.benefit import MB


def render(results: Mapping[str, Any]) -> str:
    ticks = results["ticks"]
    names = list(ticks[-1]["copies"])
    lines = [
        f"TPC-H scale {results['scale']:g}: lineitem in {results['appends'] + 1} appends in ship-date order "
        f"({results['increment'] / MB:.1f} MB each), part and supplier beside it; {results['rate']:g} queries per "
        f"simulated hour from {', '.join(results['families'])}; target file size {results['target'] / MB:.2f} MB. "
        f"{HELD_OUT} held-out queries (another seed) measure every copy after every tick.\n",
        "Per tick: each service's action, then mean fact column MB per held-out query for each copy, "
        "deltaopt's pruning / a min/max reader (direct and derived filters; dynamic file pruning's best case).\n",
    ]
    labels = [label for label, _, _ in SERVICES]
    rows = []
    for t in ticks:
        cells = [
            f"{t['copies'][n]['all']['deltaopt MB']:.2f} / {t['copies'][n]['all']['min/max MB']:.2f}" for n in names
        ]
        rows.append((t["tick"], " / ".join(t["services"][label]["action"] for label in labels), *cells))
    lines.append(table(("tick", "actions", *names), rows))
    for label in labels:
        lines.append(f"\nDecisions of the {label}:\n")
        for t in ticks:
            d = t["services"][label]
            lines.append(f"- tick {t['tick']}: {d['action']}: {d['reason']}; features {json.dumps(d['features'])}")
            for c in d["joined_candidates"]:
                lines.append(f"  - joined candidate {c['feature']}: {c['role']}: {c['reason']}")
    last = ticks[-1]["copies"]
    final = results["final"]
    lines.append(
        "\nFinal state, per family and copy: fact column MB per query by deltaopt's pruning and by min/max "
        "(share of none's), by Spark's own Delta scan with the query's direct filters (file MB), files "
        "(deltaopt / min/max / DuckDB / holding a match of all files), and scans where a reader skipped a "
        "file holding a matching row.\n"
    )
    rows = []
    for family in [*results["families"], "all"]:
        base = last["none"].get(family)
        if base is None:
            continue
        for n in names:
            f, g = last[n][family], final[n][family]
            rows.append(
                (
                    family if n == names[0] else "",
                    n,
                    f"{f['deltaopt MB']:.2f} ({f['deltaopt MB'] / base['deltaopt MB']:.3f})",
                    f"{f['min/max MB']:.2f} ({f['min/max MB'] / base['min/max MB']:.3f})",
                    f"{g['spark MB']:.2f}",
                    f"{f['deltaopt files']:.1f} / {f['min/max files']:.1f} / {g['duckdb files']:.1f} / "
                    f"{g['bound files']:.1f} of {last[n]['files']}",
                    int(g["unsound"]),
                )
            )
    lines.append(table(("family", "copy", "deltaopt MB", "min/max MB", "Spark MB", "files", "unsound"), rows))
    if results.get("kept_over_bound"):
        race = {
            name: KeptOverBound(**{**k, "ratios": tuple(k["ratios"])}) for name, k in results["kept_over_bound"].items()
        }
        names = {"service": SERVICES[0][0], "zorder": "Delta ZORDER BY", "liquid": "Delta liquid"}
        lines.append(kept_share.render(race, names))
    seconds: dict[str, float] = defaultdict(float)
    for t in ticks:
        for label, d in t["services"].items():
            seconds[label] += d["job_seconds"] or 0
        for name, s in t["peer_seconds"].items():
            seconds[name] += s
    lines.append(
        "\nRewrite seconds over the run (absolute times are noise here; compare side by side): "
        + ", ".join(f"{n} {s:.1f}" for n, s in seconds.items())
        + "."
    )
    return "\n".join(lines)
