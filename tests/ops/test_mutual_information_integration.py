# SPDX-License-Identifier: Apache-2.0
"""The MI op inside XLA, Keras `fit` and `tf.distribute.MirroredStrategy`."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import tf_transducer as tt
from tests.ops.mi_reference import mi_reference

HERE = os.path.dirname(os.path.abspath(__file__))


def test_jit_compile_runs_the_tf_path_and_matches_the_op():
    rng = np.random.default_rng(0)
    px = rng.normal(size=(3, 4, 6))
    py = rng.normal(size=(3, 5, 5))
    bnd = np.array([[0, 0, 4, 5], [1, 0, 3, 5], [0, 2, 2, 4]])

    def score_and_grads(px, py):
        with tf.GradientTape() as tape:
            tape.watch([px, py])
            scores = tt.mutual_information_recursion(px, py, bnd)
            total = tf.reduce_sum(scores)
        return scores, tape.gradient(total, [px, py])

    got = tf.function(score_and_grads, jit_compile=True)(
        tf.constant(px), tf.constant(py)
    )
    want = mi_reference(px, py, bnd)
    for g, w in zip(tf.nest.flatten(got), want, strict=True):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-10, atol=1e-12)


def test_xla_context_is_detected_only_under_jit_compile():
    seen = []

    def probe():
        seen.append(tt.ops.in_xla_context())
        return tf.constant(0)

    tf.function(probe, jit_compile=True)()
    tf.function(probe)()
    assert seen == [True, False]
    assert not tt.ops.in_xla_context()  # eager


class AlignmentScore(keras.layers.Layer):
    """Per-cell 2-way log-softmax -> px, py -> log P(reach (S, T))."""

    def __init__(self, S, T, **kwargs):
        super().__init__(**kwargs)
        self.S, self.T = S, T

    def call(self, logits):
        logits = tf.reshape(logits, [-1, self.S + 1, self.T + 1, 2])
        logp = tf.nn.log_softmax(logits, axis=-1)
        px = logp[:, : self.S, :, 0]
        py = logp[:, :, : self.T, 1]
        return tt.mutual_information_recursion(px, py)


def make_model(S=3, T=5):
    inputs = keras.Input((8,))
    logits = keras.layers.Dense((S + 1) * (T + 1) * 2)(inputs)
    return keras.Model(inputs, AlignmentScore(S, T)(logits))


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_keras_fit_lowers_the_negative_log_score(jit_compile):
    keras.utils.set_random_seed(1)
    model = make_model()
    model.compile(
        optimizer=keras.optimizers.Adam(0.05),
        loss=lambda y_true, y_pred: -y_pred,
        jit_compile=jit_compile,
    )
    x = np.random.default_rng(2).normal(size=(32, 8)).astype(np.float32)
    history = model.fit(x, np.zeros(32), batch_size=8, epochs=4, verbose=0)
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses))
    assert losses[-1] < 0.5 * losses[0], losses


def test_mirrored_strategy_on_two_logical_cpus():
    # Logical devices must be configured before TensorFlow starts, so this
    # runs in a fresh interpreter.
    script = os.path.join(HERE, "mirrored_strategy_check.py")
    result = subprocess.run(
        [sys.executable, script], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "replicas=2" in result.stdout
