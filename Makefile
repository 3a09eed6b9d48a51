# The two set-up commands (see README): `make bench` runs the main job, `make test` the tests.
# Each creates the virtualenv and installs what it needs on a machine that has only
# Python 3.11, Java 17 and the package registries.

PYTHON  ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
SCALE   ?= 1
BENCH_OUT ?= bench-out

.PHONY: test bench stress venv clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest tests

stress: $(STAMP)
	$(PY) -m pytest tests -m stress

bench: $(STAMP)
	$(PY) -m benchmarks.tpch_suite --scale $(SCALE) --out $(BENCH_OUT)

clean:
	rm -rf $(VENV) $(BENCH_OUT) .pytest_cache
