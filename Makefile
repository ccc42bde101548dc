# The README's two commands: `make demo` and `make test`.  Each creates .venv
# and installs what it needs on a fresh machine.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CC_FILES := $(shell find cc -name '*.cc' -o -name '*.h' -o -name '*.cu')
CC_TEST_FILES := $(wildcard tests/cc/*.cc)
PYTEST_WORKERS ?= 2
# The TensorFlow the library is compiled against (and pinned to: its ABI).
TF_VERSION := 2.21.0
# Everything but kenlm ([lm], compiled on install): its tests use the pure
# Python ARPA reader when kenlm is missing.
DEV_EXTRAS := data,export,train,test,docs,notebooks,package

.PHONY: docs bazel-test package-test demo test test-slow bench build lint format clean test-cuda-build cuda-toolchain gpu-harness gpu-check notebooks gpu-emu-check gpu-emu-tsan gpu-emu-tsan-full gpu-emu-mutants gpu-emu

$(STAMP): pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip "setuptools>=77" wheel
	$(PY) -m pip install --quiet "tensorflow==$(TF_VERSION)"
	$(PY) -m pip install --quiet --no-build-isolation -e ".[$(DEV_EXTRAS)]"
	touch $@

# Recompiles only what changed (object files are kept under build/).
tf_transducer/_ops.so: $(CC_FILES) setup.py | $(STAMP)
	$(PY) setup.py --quiet build_ext --inplace

build: tf_transducer/_ops.so

demo: build
	$(PY) examples/digits_transducer_demo.py

# `make test` leaves the few end-to-end training runs marked slow (a minute
# or more each) to `make test-slow`; .ci/run runs both.
test: build
	$(PY) -m pytest -n $(PYTEST_WORKERS) -m "not slow" tests

test-slow: build
	$(PY) -m pytest -n $(PYTEST_WORKERS) -m slow tests

# Every benchmark, each run as a module from the repository root (results:
# benchmarks/BENCHMARKS.md).  The last three measure the demo's trained run,
# so `make demo` runs first when there is none.  bench_gpu needs a GPU: it is
# part of `make gpu-check`.
BENCHMARKS := bench_mutual_information bench_rnnt_loss rss_rnnt_loss bench_fast_rnnt \
  bench_joint_loss bench_half_logits bench_pipeline bench_spec_augment bench_deepspeech \
  bench_lattice bench_neural_transducer bench_multiworker \
  bench_transducer bench_tflite bench_real_speech
DEMO_RUN := runs/digits_demo
bench: build
	test -d $(DEMO_RUN)/tflite || $(MAKE) demo
	set -e; for b in $(BENCHMARKS); do \
	  echo "== python -m benchmarks.$$b"; $(PY) -m benchmarks.$$b; done

# The CUDA 12.5 toolchain the wheel's GPU kernels are built with, as
# TensorFlow 2.21 builds its own (docs/guides/gpu.md): clang-16 (Debian's;
# installed when missing) against CUDA 12.5's headers, libdevice and ptxas
# from pinned PyPI wheels, assembled by .ci/cuda_toolchain.py.
CUDA_TOOLCHAIN := build/cuda-12.5
CLANG_CUDA ?= clang++-16
cuda-toolchain: | $(STAMP)
	command -v $(CLANG_CUDA) >/dev/null || { \
	  command -v apt-get >/dev/null || { echo "cuda-toolchain: no $(CLANG_CUDA) on the PATH and no apt-get to install clang-16"; exit 1; }; \
	  sudo=$$(test "$$(id -u)" = 0 || echo sudo); \
	  $$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-16 >/dev/null; }
	$(PY) .ci/cuda_toolchain.py $(CUDA_TOOLCHAIN)

# The library built with the CUDA kernels (TT_CUDA=1), kept apart in
# build-cuda/: by default with the CUDA 12.5 toolchain above, as the wheel
# is (CUDA_BUILD=nvcc: with the nvcc on the PATH instead).  Its cubins and
# PTX are listed and checked (.ci/cuda_binaries.py: sm_80/86/89/90, CUDA 12's
# ELF ABI, compute_90 PTX), then the op tests run on it: on a machine without
# a GPU this checks that it builds, loads and computes on the CPU as the
# plain build does; on a GPU machine the GPU tests (tests/ops/test_gpu.py) run
# too.  Also builds the GPU harness with nvcc, where there is one, and runs it
# when a GPU is present.
CUDA_BUILD ?= pypi
CUDA_LIB := build-cuda/tf_transducer/_ops.so
CUDA_ENV_pypi = TT_CUDA_PATH=$(CURDIR)/$(CUDA_TOOLCHAIN) TT_CUDA_CLANG=$(CLANG_CUDA)
test-cuda-build: $(if $(filter pypi,$(CUDA_BUILD)),cuda-toolchain) | $(STAMP)
	TT_CUDA=1 $(CUDA_ENV_$(CUDA_BUILD)) $(PY) setup.py --quiet build_ext --build-lib build-cuda --build-temp build-cuda/temp
	if [ -x $(CUDA_TOOLCHAIN)/bin/cuobjdump ]; then \
	  $(PY) .ci/cuda_binaries.py $(CUDA_TOOLCHAIN)/bin/cuobjdump $(CUDA_LIB); \
	else echo "no cuobjdump ($(CUDA_TOOLCHAIN)): the cubins are not listed"; fi
	TF_TRANSDUCER_OPS_LIBRARY=$(CURDIR)/$(CUDA_LIB) TT_EXPECT_GPU_KERNELS=1 \
	  $(PY) -m pytest -n $(PYTEST_WORKERS) tests/ops tests/test_losses.py tests/test_pruned_loss.py
	if command -v $(NVCC) >/dev/null; then \
	  $(MAKE) gpu-harness; \
	  status=0; $(GPU_HARNESS) check || status=$$?; \
	  if [ $$status -eq 2 ]; then echo "gpu harness built; no GPU here to run it"; else exit $$status; fi; \
	else echo "no $(NVCC): the GPU harness is not built (make gpu-emu-check runs it on the CPU)"; fi

# The standalone GPU harness: nvcc and the project's headers, no TensorFlow.
NVCC ?= nvcc
GPU_HARNESS := build/gpu_harness
CUDA_SOURCES := $(wildcard cc/kernels/gpu/*.cu)
$(GPU_HARNESS): cc/gpu_harness/harness.cu $(CC_FILES)
	mkdir -p build
	$(NVCC) -std=c++17 --expt-relaxed-constexpr -O3 -I . \
	  -gencode arch=compute_80,code=sm_80 -gencode arch=compute_86,code=sm_86 \
	  -gencode arch=compute_89,code=sm_89 -gencode arch=compute_90,code=sm_90 \
	  -gencode arch=compute_90,code=compute_90 \
	  cc/gpu_harness/harness.cu $(CUDA_SOURCES) -o $@

gpu-harness: $(GPU_HARNESS)

# The same harness, and the emulator's self-test, built by g++ against the
# CPU emulator of cc/gpu_emu instead of CUDA (no GPU, no nvcc), one object
# per source (-MMD: a change rebuilds what includes it).  gpu-emu-check: the
# AddressSanitizer + UndefinedBehaviorSanitizer build, the self-test and
# every `check` case with the blocks in reverse order (about 30 s to run);
# gpu-emu-tsan: the ThreadSanitizer build, blocks shuffled, `check --quick`
# (every kernel in every type; about a minute), gpu-emu-tsan-full every case
# (about 2.5 minutes); gpu-emu-mutants: planted bugs each of which
# gpu-emu-check must catch (tests/gpu_emu/mutants.py).
# GPU_EMU_ROOT builds another copy of cc/ (the mutants' scratch copies).
GPU_EMU_CXX ?= g++
GPU_EMU_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
GPU_EMU_ROOT ?= .
GPU_EMU_FLAGS := -std=c++17 -O2 -g -pthread -fno-omit-frame-pointer -Wall \
  -Wno-unknown-pragmas -Wno-sign-compare -I $(GPU_EMU_ROOT) -I $(GPU_EMU_ROOT)/cc/gpu_emu -MMD -MP
GPU_EMU_SANITIZE_asan := -fsanitize=address,undefined -fno-sanitize-recover=all
GPU_EMU_SANITIZE_tsan := -fsanitize=thread
GPU_EMU_HARNESS := cc/gpu_harness/harness.cu $(sort $(notdir $(CUDA_SOURCES)))
GPU_EMU_OUT = $(GPU_EMU_ROOT)/build/gpu_emu/$(1)
GPU_EMU_OBJ = $(call GPU_EMU_OUT,$(1))/$(basename $(notdir $(2))).o
# $(1): asan or tsan.
define GPU_EMU_VARIANT
$(call GPU_EMU_OUT,$(1))/%.o: $(GPU_EMU_ROOT)/cc/kernels/gpu/%.cu
	@mkdir -p $$(@D)
	$(GPU_EMU_CXX) $(GPU_EMU_FLAGS) $(GPU_EMU_SANITIZE_$(1)) -x c++ -c $$< -o $$@
$(call GPU_EMU_OUT,$(1))/%.o: $(GPU_EMU_ROOT)/cc/gpu_harness/%.cu
	@mkdir -p $$(@D)
	$(GPU_EMU_CXX) $(GPU_EMU_FLAGS) $(GPU_EMU_SANITIZE_$(1)) -x c++ -c $$< -o $$@
$(call GPU_EMU_OUT,$(1))/%.o: $(GPU_EMU_ROOT)/cc/gpu_emu/%.cu
	@mkdir -p $$(@D)
	$(GPU_EMU_CXX) $(GPU_EMU_FLAGS) $(GPU_EMU_SANITIZE_$(1)) -x c++ -c $$< -o $$@
$(call GPU_EMU_OUT,$(1))/harness: $(foreach f,$(GPU_EMU_HARNESS),$(call GPU_EMU_OBJ,$(1),$(f)))
	$(GPU_EMU_CXX) $(GPU_EMU_SANITIZE_$(1)) -pthread $$^ -o $$@
$(call GPU_EMU_OUT,$(1))/selftest: $(call GPU_EMU_OBJ,$(1),selftest.cu)
	$(GPU_EMU_CXX) $(GPU_EMU_SANITIZE_$(1)) -pthread $$^ -o $$@
-include $(wildcard $(call GPU_EMU_OUT,$(1))/*.d)
endef
$(eval $(call GPU_EMU_VARIANT,asan))
$(eval $(call GPU_EMU_VARIANT,tsan))

# ASan's one warning about swapcontext is expected (the fiber switches are
# announced to it: cc/gpu_emu/fiber.h).
gpu-emu-check:
	$(MAKE) --no-print-directory -j$(GPU_EMU_JOBS) $(call GPU_EMU_OUT,asan)/harness $(call GPU_EMU_OUT,asan)/selftest
	$(call GPU_EMU_OUT,asan)/selftest
	TT_GPU_EMU_ORDER=reverse $(call GPU_EMU_OUT,asan)/harness check $(GPU_EMU_CHECK_FLAGS)

gpu-emu-tsan gpu-emu-tsan-full:
	$(MAKE) --no-print-directory -j$(GPU_EMU_JOBS) $(call GPU_EMU_OUT,tsan)/harness
	TSAN_OPTIONS="halt_on_error=1 exitcode=1" TT_GPU_EMU_ORDER=shuffle:7 \
	  $(call GPU_EMU_OUT,tsan)/harness check $(if $(filter gpu-emu-tsan,$@),--quick)

gpu-emu-mutants: gpu-emu-check
	python3 tests/gpu_emu/mutants.py --jobs $(GPU_EMU_JOBS)

gpu-emu: gpu-emu-check gpu-emu-tsan gpu-emu-mutants

# On a GPU machine (TensorFlow and a network not needed), one command: the
# CUDA kernels against the CPU maths (every case, every type), the same under
# compute-sanitizer's memcheck and racecheck when it is installed, their
# timings (bench; bench-joint in float32, bfloat16 on tensor cores and TF32),
# and the comparison with torchaudio and a torch joiner when torch is
# installed (benchmarks/bench_gpu.py, which runs the benches itself).  Sized
# to fit a few minutes; not yet run on a GPU.
gpu-check: $(GPU_HARNESS)
	$(GPU_HARNESS) check
	if command -v compute-sanitizer >/dev/null; then \
	  compute-sanitizer --tool memcheck --error-exitcode 1 $(GPU_HARNESS) check && \
	  compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 1 $(GPU_HARNESS) check; \
	else echo "compute-sanitizer not found: memcheck and racecheck skipped"; fi
	if python3 -c "import torch, torchaudio" 2>/dev/null; then \
	  python3 -m benchmarks.bench_gpu --harness $(GPU_HARNESS); \
	else echo "torch/torchaudio not found: timing ours only"; \
	  $(GPU_HARNESS) bench; $(GPU_HARNESS) bench-joint; \
	  $(GPU_HARNESS) bench-joint --dtype bfloat16; \
	  $(GPU_HARNESS) bench-joint --products tensor_cores; fi

# The source archive and a manylinux wheel under dist/ (the wheel built from
# the unpacked archive, as an index would), each installed into a clean venv
# with only TensorFlow and checked from another folder: .ci/package_test.
# The wheel holds the GPU kernels, built with the CUDA 12.5 toolchain
# (cuda-toolchain); PACKAGE_CUDA=0 builds a CPU-only wheel.
PACKAGE_CUDA ?= 1
package-test: $(if $(filter 1,$(PACKAGE_CUDA)),cuda-toolchain) | $(STAMP)
	$(if $(filter 1,$(PACKAGE_CUDA)),TT_CUDA=1 $(CUDA_ENV_pypi) CUOBJDUMP=$(CURDIR)/$(CUDA_TOOLCHAIN)/bin/cuobjdump) \
	  bash .ci/package_test $(CURDIR)/$(PY)

# The same library built by Bazel (docs/guides/bazel.md): Debian's
# bazel-bootstrap is installed when no `bazel` is on the PATH; then //... is
# built, the C++ unit tests run under Bazel, and the op tests run against
# build/bazel-bin/tf_transducer/_ops.so (the loader checks its TF version).
BAZEL ?= bazel
BAZEL_ENV := PYTHON_BIN_PATH=$(CURDIR)/$(PY)
BAZEL_LIB := build/bazel-bin/tf_transducer/_ops.so
bazel-test: | $(STAMP)
	command -v $(BAZEL) >/dev/null || { \
	  command -v apt-get >/dev/null || { echo "bazel-test: no $(BAZEL) on the PATH and no apt-get to install bazel-bootstrap"; exit 1; }; \
	  sudo=$$(test "$$(id -u)" = 0 || echo sudo); \
	  $$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bazel-bootstrap >/dev/null; }
	$(BAZEL_ENV) $(BAZEL) build //...
	$(BAZEL_ENV) $(BAZEL) test //tests/cc/...
	TF_TRANSDUCER_OPS_LIBRARY=$(CURDIR)/$(BAZEL_LIB) \
	  $(PY) -m pytest -n $(PYTEST_WORKERS) tests/ops tests/test_losses.py tests/test_pruned_loss.py

# The documentation site (docs/, mkdocs.yml; the API reference from the
# docstrings, read without importing TensorFlow) built with warnings as
# errors into a temporary folder, removed after: nothing is left in the tree.
# To read it: .venv/bin/mkdocs serve, or mkdocs build (into site/, ignored).
docs: | $(STAMP)
	tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  PYTHONDONTWRITEBYTECODE=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir "$$tmp"

# The notebooks (notebooks/*.ipynb): first checked to hold no outputs, then
# each executed top to bottom in a fresh kernel of .venv's Python, in a
# scratch folder removed afterwards (nothing is left in the tree); a cell
# that raises, or a notebook over --timeout seconds, fails the target.
# NOTEBOOK_FLAGS="--output_dir DIR" keeps the executed copies, plots included.
NOTEBOOK_FLAGS ?=
notebooks: build
	$(PY) notebooks/run_notebooks.py --check-stripped
	$(PY) notebooks/run_notebooks.py --timeout 300 $(NOTEBOOK_FLAGS)

lint: | $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/clang-format --dry-run --Werror $(CC_FILES) $(CC_TEST_FILES)

format: | $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/clang-format -i $(CC_FILES) $(CC_TEST_FILES)

clean:
	rm -rf build build-cuda dist tf_transducer/_ops.so
