# The README's two commands: `make demo` and `make test`.  Each creates .venv
# and installs what it needs on a fresh machine.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CC_FILES := $(shell find cc -name '*.cc' -o -name '*.h')
PYTEST_WORKERS ?= 2

.PHONY: demo test test-all bench build lint format clean

$(STAMP): pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip "setuptools>=77" wheel
	$(PY) -m pip install --quiet "tensorflow==2.21.0"
	$(PY) -m pip install --quiet --no-build-isolation -e ".[test]"
	touch $@

# Recompiles only what changed (object files are kept under build/).
tf_transducer/_ops.so: $(CC_FILES) setup.py | $(STAMP)
	$(PY) setup.py --quiet build_ext --inplace

build: tf_transducer/_ops.so

demo: build
	$(PY) examples/digits_transducer_demo.py

test: build
	$(PY) -m pytest -n $(PYTEST_WORKERS) tests

test-all: build
	$(PY) -m pytest -n $(PYTEST_WORKERS) -m "" tests

bench: build
	$(PY) benchmarks/bench_mutual_information.py
	$(PY) benchmarks/bench_rnnt_loss.py
	$(PY) benchmarks/rss_rnnt_loss.py
	$(PY) benchmarks/bench_pipeline.py
	$(PY) benchmarks/bench_spec_augment.py
	$(PY) benchmarks/bench_deepspeech.py
	$(PY) benchmarks/bench_transducer.py

lint: | $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/clang-format --dry-run --Werror $(CC_FILES)

format: | $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/clang-format -i $(CC_FILES)

clean:
	rm -rf build tf_transducer/_ops.so
