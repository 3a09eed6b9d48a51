# The two set-up commands (see README): `make bench` runs the main job, `make test` the tests.
# Each creates the virtualenv and installs what it needs on a machine that has only
# Python 3.11, Java 17 and the package registries.

PYTHON  ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
SCALE   ?= 1
BENCH_OUT ?= bench-out

JAR     := native/target/raptorx-native.jar
NATIVE_SRC := $(shell find native/src -type f)

.PHONY: test bench stress venv native clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# The JVM provider, built with the Scala compiler inside pyspark's jars (no Maven); rebuilt
# when missing or older than its sources.
$(JAR): $(NATIVE_SRC) native/build.sh $(STAMP)
	native/build.sh $(PY)

native: $(JAR)

test: $(STAMP) $(JAR)
	$(PY) -m pytest tests

stress: $(STAMP) $(JAR)
	$(PY) -m pytest tests -m stress

bench: $(STAMP) $(JAR)
	$(PY) -m benchmarks.tpch_suite --scale $(SCALE) --out $(BENCH_OUT)

clean:
	rm -rf $(VENV) $(BENCH_OUT) .pytest_cache native/target
