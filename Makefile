# The two commands a new user runs: `make demo` and `make test`. Both create .venv and install first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: install demo test test-slow lint bench

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[embedded,dev,demo]'
	$(BIN)/python -m optimizer.delta_jars  # Delta's JVM jars from Maven Central, cached in .venv (docs/DELTA-SPARK.md)
	rm -f $(VENV)/.installed-*
	touch $@

install: $(INSTALLED)

demo: $(INSTALLED)
	$(BIN)/deltaopt demo --workdir demo-output

test: $(INSTALLED)
	$(BIN)/pytest

test-slow: $(INSTALLED)
	$(BIN)/pytest -m slow

lint: $(INSTALLED)
	$(BIN)/ruff check optimizer querylog costmodel tests benchmarks
	$(BIN)/mypy optimizer querylog costmodel

bench: $(INSTALLED)
	$(BIN)/python -m benchmarks all
