# SPDX-License-Identifier: Apache-2.0
"""C++ unit programs under tests/cc, built with g++ and run."""

import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("name", ["log_space_math_test", "gpu_schedule_test"])
def test_cc_unit_program(tmp_path, name):
    binary = tmp_path / name
    source = os.path.join(ROOT, "tests", "cc", f"{name}.cc")
    subprocess.run(
        ["g++", "-O2", "-std=c++17", "-I", ROOT, source, "-o", str(binary)], check=True
    )
    result = subprocess.run([str(binary)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
