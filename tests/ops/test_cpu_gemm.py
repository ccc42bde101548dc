# SPDX-License-Identifier: Apache-2.0
"""The fused joint's CPU matrix products on every instruction path.

Each path is forced in a child process (TF_TRANSDUCER_CPU_GEMM is read when
the op library loads) and `rnnt_loss_joint` / `tdt_loss_joint` are checked
against the joint network + loss in float64. The shapes cross the products'
blocks: the tiles' rows (K of the weight gradient) past 256, the classes
past 512, J and C not multiples of any register block. A path this CPU does
not run must fail by naming the variable; the test then skips, saying why.
"""

import json
import os
import subprocess
import sys

import pytest

from tf_transducer.ops import cpu_gemm_paths

PATHS = ("plain", "avx2", "avx512", "avx512_bf16")
# |got - want| <= tolerance * max |want|, per output (the loss: per value).
TOLERANCE = {"float32": 2e-5, "bfloat16": 2e-2}

CHILD = r"""
import json, sys
import numpy as np
import tensorflow as tf
from tf_transducer.ops import cpu_gemm_paths, rnnt_loss, tdt_loss
from tf_transducer.ops import rnnt_loss_joint, tdt_loss_joint

B, T, S, J, C, K = 2, 40, 11, 37, 530, 3
DURATIONS = [0, 1, 2]
LENGTHS = dict(logit_lengths=[T, T - 7], label_lengths=[S, S - 4])


def unfused(symbols, encoder, predictor, weight, bias, *duration_head):
    hidden = tf.tanh(encoder[:, :, None] + predictor[:, None])
    logits = tf.einsum("btsj,jc->btsc", hidden, weight) + bias
    if duration_head:
        w, b = duration_head
        heads = tf.einsum("btsj,jk->btsk", hidden, w) + b
        return tdt_loss(logits, heads, symbols, 0, DURATIONS, reduction="sum",
                        **LENGTHS)
    return rnnt_loss(logits, symbols, 0, reduction="sum", **LENGTHS)


def fused(symbols, *x):
    if len(x) == 6:
        return tdt_loss_joint(*x, symbols, 0, DURATIONS, reduction="sum", **LENGTHS)
    return rnnt_loss_joint(*x, symbols, 0, reduction="sum", **LENGTHS)


def loss_and_grads(fn, symbols, x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = fn(symbols, *x)
    return [loss] + tape.gradient(loss, x)


def errors(dtype, loss):
    rng = np.random.default_rng(7)
    shapes = [(B, T, J), (B, S + 1, J), (J, C), (C,)]
    scales = [1.0, 1.0, J**-0.5, 0.1]
    if loss == "tdt":
        shapes, scales = shapes + [(J, K), (K,)], scales + [J**-0.5, 0.1]
    # Rounded to the inputs' dtype first, so that float64 sees the same values.
    inputs = [tf.cast(tf.cast(rng.normal(size=shape) * scale, dtype), tf.float64)
              for shape, scale in zip(shapes, scales)]
    symbols = rng.integers(1, C, (B, S))
    got = loss_and_grads(fused, symbols, [tf.cast(x, dtype) for x in inputs])
    want = loss_and_grads(unfused, symbols, inputs)
    return [float(np.abs(np.float64(g) - w).max() / np.abs(w).max())
            for g, w in zip(got, want)]


try:
    report = {f"{dtype},{loss}": errors(dtype, loss)
              for dtype in ("float32", "bfloat16") for loss in ("rnnt", "tdt")}
except tf.errors.InvalidArgumentError as e:
    print(json.dumps({"error": e.message}))
    sys.exit(0)
print(json.dumps({"active": cpu_gemm_paths().active, "errors": report}))
"""
NAMES = ["loss", "d_encoder", "d_predictor", "d_weight", "d_bias",
         "d_duration_weight", "d_duration_bias"]  # fmt: skip


def run_child(path):
    env = dict(os.environ, TF_TRANSDUCER_CPU_GEMM=path, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, env=env,
        timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("path", PATHS)
def test_each_path_equals_the_float64_joint(path):
    report = run_child(path)
    if "error" in report:
        assert "TF_TRANSDUCER_CPU_GEMM" in report["error"], report["error"]
        assert path not in cpu_gemm_paths().supported
        pytest.skip(f"this CPU does not run the {path} path: {report['error']}")
    assert report["active"] == path
    for case, errors in report["errors"].items():
        tolerance = TOLERANCE[case.split(",")[0]]
        for name, error in zip(NAMES, errors, strict=False):
            assert error <= tolerance, (case, name, error)
        assert len(errors) == (7 if case.endswith("tdt") else 5), case


def test_the_best_path_is_active_and_plain_always_runs():
    paths = cpu_gemm_paths()
    assert paths.supported[0] == "plain"
    assert set(paths.supported) <= set(PATHS)
    if not os.environ.get("TF_TRANSDUCER_CPU_GEMM"):
        assert paths.active == paths.supported[-1]


def test_a_name_that_is_no_path_is_named():
    report = run_child("avx9000")
    assert "TF_TRANSDUCER_CPU_GEMM=avx9000 is not a path" in report["error"]
    assert "avx512_bf16" in report["error"]
