# SPDX-License-Identifier: Apache-2.0
"""Fuzzing the public API with seeded malformed and extreme inputs.

Each family of cases (tests/fuzz_cases.py) runs in a child process, so that
a crash or a hang is caught as such. The goal is the issue's: no crash, no
hang, no silently wrong result on legal input, no illegal input silently
accepted, and every error names the argument, file or flag at fault.
"""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = {  # family: number of cases (each family cycles through its kinds)
    "augment": 28,
    "edges": 40,
    "mi": 60,
    "rnnt": 60,
    "simple": 48,
    "keras_losses": 42,
    "features": 54,
    "manifests": 20,
    "runners": 24,
    "lattice": 80,
    "train_loop": 10,
    "inputs": 32,
    "fused_loss": 20,
    "conformer": 26,
    "transducer_encoders": 24,
    "corpora": 22,
    "tdt": 28,
    "tdt_family": 32,
    "graph_decoding": 26,
}


def run_family(family, count, scratch):
    # The cases' temporary files go to scratch (pytest's, which it prunes).
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT, TMPDIR=scratch)
    result = subprocess.run(
        [sys.executable, "-m", "tests.fuzz_cases", family, "0", str(count)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    reports = [json.loads(line) for line in result.stdout.splitlines() if line]
    assert result.returncode == 0, (
        f"the {family} worker died (exit {result.returncode}) after "
        f"{len(reports)} cases: {result.stderr[-2000:]}"
    )
    assert len(reports) == count
    return reports


def problems(reports):
    """What is wrong with each report: [] when every case behaved."""
    found = []
    for r in reports:
        if r["legal"]:
            if r["outcome"] == "error":
                found.append(f"{r['case']}: legal input raised {r['error'][:300]}")
            elif r["outcome"] == "wrong":
                found.append(f"{r['case']}: silently wrong: {r['detail']}")
        elif r["outcome"] != "error":
            found.append(f"{r['case']}: illegal input accepted")
        elif "unexpected" in r:
            found.append(f"{r['case']}: {r['error'][:300]}")
        elif not any(name in r["error"] for name in r["names"]):
            found.append(f"{r['case']}: error names none of {r['names']}: "
                         f"{r['error'][:300]}")  # fmt: skip
    return found


@pytest.mark.parametrize("family", sorted(CASES))
def test_fuzz_family(family, tmp_path):
    reports = run_family(family, CASES[family], str(tmp_path))
    assert {r["legal"] for r in reports} == {True, False} or family == "manifests"
    assert problems(reports) == []
