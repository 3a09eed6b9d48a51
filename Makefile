# The two set-up commands (see README): `make bench` runs the main job, `make test` the tests.
# Each creates the virtualenv and installs what it needs on a machine that has only
# Python 3.11, Java 17 and the package registries.

PYTHON  ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
SCALE   ?= 1
BENCH_OUT ?= bench-out
BENCH_ARGS ?=

JAR     := native/target/raptorx-native.jar
NATIVE_SRC := $(shell find native/src/main -type f)
# TEST code: the notification-log listener of the tests' Hive Metastore (devservers/hive_metastore.py).
HMS_LISTENER_JAR := native/target/hms-test-listener.jar
HMS_LISTENER_SRC := $(shell find native/src/test -type f)

.PHONY: test bench bench-affinity stress venv native s3a-jars wheel postgres clean

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

# hadoop-aws and the AWS SDK modules Spark needs for s3a:// (the benchmark's Spark-on-S3
# baseline and its test), from Maven Central into the virtualenv (devservers/s3a_jars.py);
# resolved again when the pom changes. Maven is installed with apt-get when missing.
S3A_JARS := $(VENV)/s3a-jars/resolved.json
$(S3A_JARS): devservers/s3a/pom.xml devservers/s3a_jars.py $(STAMP)
	@command -v mvn >/dev/null || { echo "installing Maven (apt-get install maven)"; \
	  $(APT) install maven || { $(APT) update && $(APT) install maven; }; }
	$(PY) -m devservers.s3a_jars

s3a-jars: $(S3A_JARS)

# The wheel a user installs (README, "Install"): dist/raptorx_py-<version>-py3-none-any.whl,
# the jar inside (setup.py puts native/target/'s there when it was built from these sources,
# else builds it). `python -m build` from a fresh clone does the same in an isolated
# environment, with its own pyspark.
wheel: $(STAMP) $(JAR)
	$(PY) -m build --wheel --no-isolation --outdir dist .

$(HMS_LISTENER_JAR): $(HMS_LISTENER_SRC) native/build-test-listener.sh $(STAMP)
	native/build-test-listener.sh $(PY)

# PostgreSQL server binaries for the metastore tests, which start their own throw-away server
# (tests/support/postgres_fixtures.py). Does nothing when initdb is already installed. Debian's
# package may start its own cluster on port 5432; the tests do not use it, so it is stopped.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT  := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get -y -q
postgres:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null; then \
	  exit 0; fi; \
	echo "installing PostgreSQL (apt-get install postgresql)"; \
	$(APT) install postgresql || { $(APT) update && $(APT) install postgresql; } || exit 1; \
	if command -v pg_lsclusters >/dev/null && pg_lsclusters -h | grep -q online; then \
	  $(SUDO) service postgresql stop; fi

# Three pytest-xdist workers, a module each at a time (every fixture then starts once per
# worker): one worker keeps the two CPUs busy 55% of the time, three 92% (BENCHMARKS.md,
# the suite's runs). `pytest tests` alone still runs it on one.
test: $(STAMP) $(JAR) $(HMS_LISTENER_JAR) $(S3A_JARS) postgres
	$(PY) -m pytest tests -n 3 --dist loadfile

stress: $(STAMP) $(JAR)
	$(PY) -m pytest tests -m stress

# Also leaves tpch.* in the default metastore for your own queries (README, "Your own
# queries"); BENCH_ARGS passes more options, e.g. BENCH_ARGS=--no-publish. FORMAT=orc runs
# every configuration over an ORC copy of the data, against Spark's own ORC reader.
FORMAT ?= parquet
bench: $(STAMP) $(JAR) $(S3A_JARS)
	$(PY) -m benchmarks.tpch_suite --scale $(SCALE) --format $(FORMAT) --out $(BENCH_OUT) $(BENCH_ARGS)

# Soft affinity on a standalone cluster of 2 workers on loopback (benchmarks/cluster_affinity.py):
# SOFT_AFFINITY against NO_PREFERENCE, warm, per executor, over local files and the emulated S3
# endpoint (20 ms per request), caches of 0.65 of the data and of all of it. AFFINITY_ARGS
# passes more options (e.g. --stores s3 --cache-shares 0.65 --queries 1,6).
AFFINITY_SCALE ?= 0.1
AFFINITY_ARGS ?=
bench-affinity: $(STAMP) $(JAR)
	$(PY) -m benchmarks.cluster_affinity --scale $(AFFINITY_SCALE) --out $(BENCH_OUT)/affinity $(AFFINITY_ARGS)

clean:
	rm -rf $(VENV) $(BENCH_OUT) .pytest_cache native/target build dist
