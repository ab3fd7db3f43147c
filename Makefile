# The two commands a new user runs: `make demo` and `make test`. Both create .venv and install first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: install demo test check test-slow test-matrix lint bench

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[embedded,dev,demo,report]'
	$(BIN)/python -m optimizer.delta_jars  # Delta's JVM jars from Maven Central, cached in .venv (docs/DELTA-SPARK.md)
	rm -f $(VENV)/.installed-*
	touch $@

install: $(INSTALLED)

demo: $(INSTALLED)
	$(BIN)/deltaopt demo --workdir demo-output

# The default suite on the default pair (README's "Tests": its time per directory, from tests/timing.py), two
# modules at a time: pytest-xdist runs each module's tests in one worker process, with its own SparkSession,
# so module and session fixtures work as in one process. WORKERS=0 runs it in this process.
WORKERS ?= 2
test: $(INSTALLED)
	$(BIN)/pytest -n $(WORKERS) --dist loadfile

# Before a merge: the default suite, then the smoke suite on the oldest supported pair (Spark 3.5 + Delta 3.2)
check: test
	$(PYTHON) -m tests.matrix --pair spark-3.5.9-delta-3.2.1

test-slow: $(INSTALLED)
	$(BIN)/pytest -m "slow or thorough"

# The smoke suite on every supported Spark/Delta pair, a venv each under .matrix/ (docs/VERSIONS.md); writes
# docs/MATRIX.md. One pair: make test-matrix PAIR=spark-3.5.9-delta-3.2.1
test-matrix:
	$(PYTHON) -m tests.matrix $(if $(PAIR),--pair $(PAIR))

lint: $(INSTALLED)
	$(BIN)/ruff check optimizer querylog costmodel tests benchmarks
	$(BIN)/mypy optimizer querylog costmodel

bench: $(INSTALLED)
	$(BIN)/python -m benchmarks all
