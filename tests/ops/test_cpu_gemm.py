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

dtype, loss_name = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(7)
B, T, S, J, C, K = 2, 40, 11, 37, 530, 3
durations = [0, 1, 2]
def normal(*shape, scale=1.0):
    # Rounded to the inputs' dtype first, so that float64 sees the same values.
    x = tf.constant(rng.normal(size=shape) * scale, tf.float64)
    return tf.cast(tf.cast(x, dtype), tf.float64)
inputs = [normal(B, T, J), normal(B, S + 1, J), normal(J, C, scale=J ** -0.5),
          normal(C, scale=0.1)]
if loss_name == "tdt":
    inputs += [normal(J, K, scale=J ** -0.5), normal(K, scale=0.1)]
symbols = rng.integers(1, C, (B, S))
lengths = dict(logit_lengths=[T, T - 7], label_lengths=[S, S - 4])

def fused(*x):
    if loss_name == "tdt":
        return tdt_loss_joint(*x, symbols, 0, durations, reduction="sum", **lengths)
    return rnnt_loss_joint(*x, symbols, 0, reduction="sum", **lengths)

def unfused(encoder, predictor, weight, bias, *duration_head):
    hidden = tf.tanh(encoder[:, :, None] + predictor[:, None])
    logits = tf.einsum("btsj,jc->btsc", hidden, weight) + bias
    if loss_name == "tdt":
        w, b = duration_head
        heads = tf.einsum("btsj,jk->btsk", hidden, w) + b
        return tdt_loss(logits, heads, symbols, 0, durations, reduction="sum",
                        **lengths)
    return rnnt_loss(logits, symbols, 0, reduction="sum", **lengths)

def run(fn, x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = fn(*x)
    return [loss] + tape.gradient(loss, x)

try:
    got = run(fused, [tf.cast(x, dtype) for x in inputs])
except tf.errors.InvalidArgumentError as e:
    print(json.dumps({"error": e.message}))
    sys.exit(0)
want = run(unfused, inputs)
errors = [float(np.abs(np.float64(g) - w).max() / np.abs(w).max())
          for g, w in zip(got, want)]
print(json.dumps({"active": cpu_gemm_paths().active, "errors": errors}))
"""


def run_child(path, dtype, loss):
    env = dict(os.environ, TF_TRANSDUCER_CPU_GEMM=path, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(
        [sys.executable, "-c", CHILD, dtype, loss],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("loss", ["rnnt", "tdt"])
@pytest.mark.parametrize("dtype", sorted(TOLERANCE))
@pytest.mark.parametrize("path", PATHS)
def test_each_path_equals_the_float64_joint(path, dtype, loss):
    report = run_child(path, dtype, loss)
    if "error" in report:
        assert "TF_TRANSDUCER_CPU_GEMM" in report["error"], report["error"]
        assert path not in cpu_gemm_paths().supported
        pytest.skip(f"this CPU does not run the {path} path: {report['error']}")
    assert report["active"] == path
    names = ["loss", "d_encoder", "d_predictor", "d_weight", "d_bias"]
    if loss == "tdt":
        names += ["d_duration_weight", "d_duration_bias"]
    for name, error in zip(names, report["errors"], strict=True):
        assert error <= TOLERANCE[dtype], (name, error)


def test_the_best_path_is_active_and_plain_always_runs():
    paths = cpu_gemm_paths()
    assert paths.supported[0] == "plain"
    assert set(paths.supported) <= set(PATHS)
    if not os.environ.get("TF_TRANSDUCER_CPU_GEMM"):
        assert paths.active == paths.supported[-1]


def test_a_name_that_is_no_path_is_named():
    report = run_child("avx9000", "float32", "rnnt")
    assert "TF_TRANSDUCER_CPU_GEMM=avx9000 is not a path" in report["error"]
    assert "avx512_bf16" in report["error"]
