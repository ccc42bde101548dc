#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds k2's fast_rnnt 1.3 (CPU only) from its PyPI sdist in a venv of its
# own, outside the repository, for benchmarks/bench_fast_rnnt.py.
#
# Usage: bash benchmarks/fast_rnnt_env.sh [VENV]   (default /work/fast_rnnt_venv)
# Idempotent: an existing venv in which fast_rnnt imports is kept. The last
# line printed is the venv's python, for --fast_rnnt_python or
# FAST_RNNT_PYTHON. Environment: PYTHON (the interpreter that makes the venv,
# default python3), MAKE_JOBS (default 2).
set -euo pipefail

VENV="${1:-/work/fast_rnnt_venv}"
PY="$VENV/bin/python"
JOBS="${MAKE_JOBS:-2}"

if [[ ! -x "$PY" ]]; then
  "${PYTHON:-python3}" -m venv "$VENV"
fi
if "$PY" -c "import fast_rnnt" 2>/dev/null; then
  echo "fast_rnnt $("$PY" -c 'import fast_rnnt; print(fast_rnnt.__version__)') already in $VENV" >&2
  echo "$PY"
  exit 0
fi

# A CPU-only torch: the CPU index first (no CUDA wheels), else the default one.
if ! "$PY" -c "import torch" 2>/dev/null; then
  "$PY" -m pip install torch --index-url https://download.pytorch.org/whl/cpu ||
    "$PY" -m pip install torch
fi
"$PY" -m pip install pybind11 numpy setuptools wheel

SRC="$VENV/src"
mkdir -p "$SRC"
if [[ ! -f "$SRC/fast_rnnt-1.3.tar.gz" ]]; then
  "$PY" -m pip download --no-binary :all: --no-deps fast_rnnt==1.3 -d "$SRC"
fi
rm -rf "$SRC/fast_rnnt-1.3"
tar -xzf "$SRC/fast_rnnt-1.3.tar.gz" -C "$SRC"
cd "$SRC/fast_rnnt-1.3"

# pybind11 from the venv (its CMake config) instead of a download of v2.6.0.
echo "find_package(pybind11 CONFIG REQUIRED)" > cmake/pybind11.cmake

# FT_CMAKE_ARGS replaces setup.py's defaults, so they are repeated here;
# torch 2.x headers need C++17 (the project asks for 14).
export FT_CMAKE_ARGS="-DCMAKE_BUILD_TYPE=Release -DFT_BUILD_TESTS=OFF \
-DCMAKE_CXX_STANDARD=17 -DFT_WITH_CUDA=OFF -DPYBIND11_FINDPYTHON=OFF \
-Dpybind11_DIR=$("$PY" -m pybind11 --cmakedir) -DPYTHON_EXECUTABLE=$PY"
export FT_MAKE_ARGS="-j$JOBS"
nice -n 10 "$PY" -m pip install --no-build-isolation --no-deps -v . >&2

cd /
"$PY" -c "import fast_rnnt, torch; print('fast_rnnt', fast_rnnt.__version__, 'torch', torch.__version__)" >&2
echo "$PY"
