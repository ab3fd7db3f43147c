"""CLI smoke tests: the commands run, print real figures, and fail with one clear line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optimizer.cli import main

EXAMPLE = Path(__file__).resolve().parents[1] / "deploy" / "config.example.yaml"


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["--help"])
    assert caught.value.code == 0
    out = capsys.readouterr().out
    for command in ("demo", "table", "config"):
        assert command in out


def test_config_check_valid_and_invalid(capsys, tmp_path):
    assert main(["config", "check", str(EXAMPLE)]) == 0
    assert "valid (1 table(s))" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("defaults:\n  max_z_features: 0\n")
    assert main(["config", "check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "defaults.max_z_features: got 0" in err


def test_table_info_missing_table_is_one_clear_error(capsys, tmp_path):
    assert main(["table", "info", str(tmp_path / "none")]) == 2
    assert "no Delta table at" in capsys.readouterr().err


@pytest.mark.spark
def test_table_info_prints_figures_from_the_log(spark, table_path, capsys):
    from optimizer.table import open_table

    open_table(table_path).create(spark, spark.range(1000).repartition(3))
    assert main(["table", "info", table_path, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["version"] == 0
    assert info["files"] == 3
    assert info["records"] == 1000
    assert info["size_histogram"]["<1MB"] == 3
    assert info["clustered_files"] == 0 and info["unclustered_bytes"] == info["bytes"] > 0
