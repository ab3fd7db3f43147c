"""``deltaopt report``: the decision records as series (`service.report`) and as a chart file
(`cli.report`), from a decision log written as the service writes it (its JSON lines)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optimizer.cli.main import main
from optimizer.service.report import report_of
from tests.service.test_service import write_config

MB = 1024 * 1024


def records() -> list[dict]:
    """Three ticks: an estimate that skipped, a job with realised figures, and a liquid table's job."""
    return [
        {
            "ts": "2024-06-01T10:00:00+00:00",
            "table": "events",
            "action": "skip",
            "reason": "no pay",
            "benefit": {"bytes_per_query_before": 8 * MB, "bytes_per_query_after": 6 * MB, "benefit": 1.0},
        },
        {
            "ts": "2024-06-01T11:00:00+00:00",
            "table": "events",
            "action": "optimize",
            "reason": "pays",
            "benefit": {"bytes_per_query_before": 9 * MB, "bytes_per_query_after": 2 * MB, "benefit": 40.0},
            "job": {"version": 4, "run_id": "r1"},
            "realised": {"benefit": 12.5, "scans": 30, "estimated_for_scans": 10.0},
        },
        {
            "ts": "2024-06-01T12:00:00+00:00",
            "table": "events",
            "action": "optimize",
            "reason": "keys",
            "benefit": {"bytes_per_query_before": 3 * MB, "bytes_per_query_after": 1 * MB, "benefit": 5.0},
            "job": {"version": 6, "run_id": "r2"},
            "liquid": {"operation": "AUTO_CLUSTERING_COLUMN_SELECTION"},
        },
        {"ts": "2024-06-01T12:30:00+00:00", "table": "other", "action": "skip", "reason": "-"},
    ]


def test_the_series_are_each_estimate_and_each_committed_job_with_its_realised_figures():
    report = report_of("events", records())

    assert [(e.before / MB, e.after / MB) for e in report.estimates] == [(8, 6), (9, 2), (3, 1)]
    first, second = report.jobs
    assert (first.label, first.estimated, first.realised, first.scans) == ("optimize", 40.0, 12.5, 30)
    assert first.estimated_for_scans == 10.0
    assert (second.label, second.realised) == ("AUTO_CLUSTERING_COLUMN_SELECTION", None)  # not measured yet
    assert report_of("other", records()).empty


@pytest.fixture
def configured(tmp_path: Path) -> Path:
    from optimizer.config import load_config

    write_config(tmp_path, [{"name": "events", "path": str(tmp_path / "events")}])
    config = load_config(tmp_path / "deltaopt.yaml")
    log = Path(config.decision_log_path)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("".join(json.dumps(r) + "\n" for r in records()))
    return tmp_path / "deltaopt.yaml"


@pytest.mark.parametrize("suffix", [".png", ".html"])
def test_the_chart_is_drawn_to_the_file_named(configured: Path, tmp_path: Path, suffix: str, capsys):
    output = tmp_path / f"chart{suffix}"

    assert main(["report", "events", "--config", str(configured), "--output", str(output)]) == 0

    assert capsys.readouterr().out.strip() == str(output)
    content = output.read_bytes()
    if suffix == ".png":
        assert content.startswith(b"\x89PNG")
    else:
        assert b"<img" in content and b"data:image/png;base64," in content and b"deltaopt report: events" in content


def test_nothing_recorded_and_an_unknown_format_each_get_one_line(configured: Path, tmp_path: Path, capsys):
    empty = tmp_path / "empty.yaml"
    empty.write_text(configured.read_text().replace(str(tmp_path / "state"), str(tmp_path / "fresh")))
    assert main(["report", "events", "--config", str(empty), "--output", str(tmp_path / "x.png")]) == 1
    assert capsys.readouterr().err.strip() == "events: no estimate or job recorded yet: nothing to draw"

    assert main(["report", "events", "--config", str(configured), "--output", str(tmp_path / "x.txt")]) != 0
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and ".png, .svg, .pdf, .html" in said[0]
    assert not (tmp_path / "x.png").exists()
