# SPDX-License-Identifier: Apache-2.0
"""Every public op with unknown (None) batch, time and label sizes.

Users feed padded tf.data batches, whose shapes are unknown while a
tf.function is traced: each op must trace with a fully dynamic
input_signature and give what it gives eagerly, in a graph and under XLA.
"""

import numpy as np
import pytest
import tensorflow as tf

import tf_transducer as tt

B, T, S, C = 2, 6, 3, 5


def inputs():
    rng = np.random.default_rng(0)
    return dict(
        logits=rng.normal(size=(B, T, S + 1, C)).astype(np.float32),
        symbols=rng.integers(1, C, size=(B, S)).astype(np.int64),
        lm=rng.normal(size=(B, S + 1, C)).astype(np.float32),
        am=rng.normal(size=(B, T, C)).astype(np.float32),
        px=rng.normal(size=(B, S, T + 1)).astype(np.float32),
        py=rng.normal(size=(B, S + 1, T)).astype(np.float32),
        boundary=np.array([[0, 0, 3, 6], [0, 0, 2, 5]], np.int64),
        frames=np.array([6, 5], np.int32),
        labels=np.array([3, 2], np.int32),
    )


def ranges_of(lm, am, symbols, boundary, s_range=2, rnnt_type="regular"):
    _, (px_grad, py_grad) = tt.rnnt_loss_simple(
        lm, am, symbols, 0, boundary, rnnt_type, return_grad=True
    )
    return tt.get_rnnt_prune_ranges(px_grad, py_grad, boundary, s_range)


def pruned_loss(lm, am, symbols, boundary):
    ranges = ranges_of(lm, am, symbols, boundary)
    am_pruned, lm_pruned = tt.do_rnnt_pruning(am, lm, ranges)
    return tt.rnnt_loss_pruned(am_pruned + lm_pruned, symbols, ranges, 0, boundary)


CASES = {
    "mutual_information_recursion": (
        lambda px, py, boundary: tt.mutual_information_recursion(px, py, boundary),
        ("px", "py", "boundary"),
    ),
    "mutual_information_recursion_tf": (
        lambda px, py, boundary: tt.mutual_information_recursion_tf(px, py, boundary),
        ("px", "py", "boundary"),
    ),
    "rnnt_loss/boundary": (
        lambda logits, symbols, boundary: tt.rnnt_loss(logits, symbols, 0, boundary),
        ("logits", "symbols", "boundary"),
    ),
    "rnnt_loss/lengths": (
        lambda logits, symbols, frames, labels: tt.rnnt_loss(
            logits, symbols, 0, logit_lengths=frames, label_lengths=labels
        ),
        ("logits", "symbols", "frames", "labels"),
    ),
    "rnnt_loss/modified": (
        lambda logits, symbols, boundary: tt.rnnt_loss(
            logits, symbols, 0, boundary, "modified", reduction="none"
        ),
        ("logits", "symbols", "boundary"),
    ),
    "rnnt_loss_simple": (
        lambda lm, am, symbols, frames, labels: tt.rnnt_loss_simple(
            lm, am, symbols, 0, logit_lengths=frames, label_lengths=labels
        ),
        ("lm", "am", "symbols", "frames", "labels"),
    ),
    "rnnt_loss_smoothed": (
        lambda lm, am, symbols, boundary: tt.rnnt_loss_smoothed(
            lm, am, symbols, 0, 0.25, 0.0, boundary, reduction="none"
        ),
        ("lm", "am", "symbols", "boundary"),
    ),
    "get_rnnt_logprobs_joint": (
        lambda logits, symbols, boundary: tt.get_rnnt_logprobs_joint(
            logits, symbols, 0, boundary
        ),
        ("logits", "symbols", "boundary"),
    ),
    "get_rnnt_prune_ranges": (ranges_of, ("lm", "am", "symbols", "boundary")),
    "get_rnnt_prune_ranges/modified": (
        lambda lm, am, symbols, boundary: ranges_of(
            lm, am, symbols, boundary, 1, "modified"
        ),
        ("lm", "am", "symbols", "boundary"),
    ),
    "get_rnnt_prune_ranges/wide": (
        lambda lm, am, symbols, boundary: ranges_of(lm, am, symbols, boundary, 9),
        ("lm", "am", "symbols", "boundary"),
    ),
    "rnnt_loss_pruned": (pruned_loss, ("lm", "am", "symbols", "boundary")),
}


def dynamic_spec(x):
    return tf.TensorSpec([None] * x.ndim, tf.as_dtype(x.dtype))


@pytest.mark.parametrize("mode", ["graph", "xla"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_fully_dynamic_signature_equals_eager(name, mode):
    fn, names = CASES[name]
    data = inputs()
    args = [data[n] for n in names]
    want = tf.nest.map_structure(np.asarray, fn(*args))
    traced = tf.function(
        fn,
        input_signature=[dynamic_spec(a) for a in args],
        jit_compile=mode == "xla",
    )
    got = traced(*args)
    for w, g in zip(tf.nest.flatten(want), tf.nest.flatten(got), strict=True):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_gradients_with_a_dynamic_signature_equal_eager():
    data = inputs()

    def loss_and_grads(logits, lm, am, symbols, boundary):
        with tf.GradientTape() as tape:
            tape.watch([logits, lm, am])
            loss = tt.rnnt_loss(logits, symbols, 0, boundary) + pruned_loss(
                lm, am, symbols, boundary
            )
        return loss, tape.gradient(loss, [logits, lm, am])

    args = [tf.constant(data[n]) for n in ("logits", "lm", "am", "symbols", "boundary")]
    want = loss_and_grads(*args)
    traced = tf.function(
        loss_and_grads, input_signature=[dynamic_spec(a.numpy()) for a in args]
    )
    got = traced(*args)
    for w, g in zip(tf.nest.flatten(want), tf.nest.flatten(got), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
