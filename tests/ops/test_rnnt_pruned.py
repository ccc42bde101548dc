# SPDX-License-Identifier: Apache-2.0
"""Pruned RNN-T: ranges, pruning, pruned log-probs and loss."""

import math

import numpy as np
import pytest
import tensorflow as tf

import tf_transducer as tt
from tests.ops.rnnt_reference import log_softmax
from tests.ops.rnnt_reference import prune_ranges_reference
from tests.ops.rnnt_reference import pruned_logprobs_reference
from tf_transducer.ops import rnnt
from tf_transducer.ops import rnnt_pruned

TYPES = ["regular", "modified", "constrained"]


def simple_problem(rng, B=3, T=12, S=5, C=6):
    lm = rng.normal(size=(B, S + 1, C))
    am = rng.normal(size=(B, T, C)) * 2
    symbols = rng.integers(1, C, size=(B, S))
    s_end = np.array([S, S - 1, 2])[:B]
    t_end = np.array([T, T - 3, T - 5])[:B]
    boundary = np.stack([0 * s_end, 0 * s_end, s_end, t_end], 1).astype(np.int64)
    return lm, am, symbols, boundary


def occupations(lm, am, symbols, boundary, rnnt_type):
    _, (px_grad, py_grad) = rnnt.rnnt_loss_simple(
        lm, am, symbols, 0, boundary, rnnt_type, reduction="none", return_grad=True
    )
    return px_grad.numpy(), py_grad.numpy()


def test_monotonic_lower_bound_examples():
    got = rnnt_pruned._monotonic_lower_bound(tf.constant([0, 2, 1, 3, 6, 5, 8]))
    np.testing.assert_array_equal(got, [0, 1, 1, 3, 5, 5, 8])


@pytest.mark.parametrize(
    "rnnt_type,s_range",
    # s_range 1 is valid for modified and constrained only (see the error test).
    [(t, r) for t in TYPES for r in (1, 2, 3, 5, 9) if t != "regular" or r >= 2],
)
def test_prune_ranges_match_reference(rnnt_type, s_range):
    rng = np.random.default_rng([len(rnnt_type), s_range])
    lm, am, symbols, boundary = simple_problem(rng)
    px_grad, py_grad = occupations(lm, am, symbols, boundary, rnnt_type)
    got = rnnt_pruned.get_rnnt_prune_ranges(px_grad, py_grad, boundary, s_range).numpy()
    want = prune_ranges_reference(px_grad, py_grad, boundary, s_range)
    np.testing.assert_array_equal(got, want)
    starts = got[:, :, 0]
    assert (np.diff(starts, axis=1) >= 0).all()
    step = 2 if rnnt_type != "regular" else min(s_range, 6)
    assert (np.diff(starts, axis=1) < step).all()
    assert (starts[:, 0] == 0).all() and (got <= 5).all()


@pytest.mark.parametrize("rnnt_type", TYPES)
def test_pruned_logprobs_match_reference(rnnt_type):
    rng = np.random.default_rng(1)
    lm, am, symbols, boundary = simple_problem(rng)
    px_grad, py_grad = occupations(lm, am, symbols, boundary, rnnt_type)
    ranges = rnnt_pruned.get_rnnt_prune_ranges(px_grad, py_grad, boundary, 3)
    am_p, lm_p = rnnt_pruned.do_rnnt_pruning(am, lm, ranges)
    logits = (am_p + lm_p).numpy()
    got = rnnt_pruned.get_rnnt_logprobs_pruned(
        logits, symbols, ranges, 0, boundary, rnnt_type
    )
    want = pruned_logprobs_reference(
        logits, symbols, ranges.numpy(), 0, boundary, rnnt_type
    )
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def test_do_rnnt_pruning_gathers_the_kept_rows():
    rng = np.random.default_rng(2)
    am, lm = rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 5, 3))
    ranges = np.array([[[0, 1], [1, 2], [1, 2], [3, 4]]] * 2)
    am_p, lm_p = rnnt_pruned.do_rnnt_pruning(am, lm, ranges)
    assert am_p.shape == lm_p.shape == (2, 4, 2, 3)
    np.testing.assert_array_equal(lm_p[1, 3, 1], lm[1, 4])
    np.testing.assert_array_equal(am_p[0, 2, 0], am[0, 2])


def _pruning_grads(am, lm, ranges, weights, prune):
    am, lm = tf.constant(am), tf.constant(lm)
    with tf.GradientTape() as tape:
        tape.watch([am, lm])
        am_p, lm_p = prune(am, lm, ranges)
        loss = sum(
            tf.reduce_sum(tf.cast(x, tf.float64) * w)
            for x, w in zip((am_p, lm_p), weights, strict=True)
        )
    return tape.gradient(loss, [am, lm])


@pytest.mark.parametrize("dtype", [tf.float64, tf.float32, tf.float16, tf.bfloat16])
def test_do_rnnt_pruning_op_gradient_equals_tensorflows(dtype):
    # The CPU op's one-pass gradient against TensorFlow's (gather + broadcast)
    # in float64, with rows used by several frames and by none, and C over
    # one block of 128. The upstream gradients are quarters (exact in every
    # type) and their sums too, so every type must give them exactly.
    rng = np.random.default_rng(12)
    am = tf.cast(rng.normal(size=(3, 6, 130)), dtype)
    lm = tf.cast(rng.normal(size=(3, 7, 130)), dtype)
    begin = np.array([[0, 0, 1, 3, 3, 4], [0, 1, 2, 2, 2, 2], [0, 0, 0, 0, 0, 0]])
    ranges = tf.constant(begin[..., np.newaxis] + np.arange(3))
    weights = rng.integers(-8, 9, size=(2, 3, 6, 3, 130)) / 4
    assert rnnt_pruned._pruning_op_applies(am, lm)
    got = _pruning_grads(am, lm, ranges, weights, rnnt_pruned.do_rnnt_pruning)
    wide = [tf.cast(x, tf.float64) for x in (am, lm)]
    want = _pruning_grads(*wide, ranges, weights, rnnt_pruned._prune)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == dtype
        np.testing.assert_array_equal(tf.cast(g, tf.float64), w)


def test_do_rnnt_pruning_op_gradient_traced_and_one_output_used():
    rng = np.random.default_rng(13)
    am, lm = rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 5, 3))
    ranges = tf.constant([[[0, 1], [1, 2], [1, 2], [3, 4]]] * 2, tf.int64)
    spec = tf.TensorSpec([None, None, None], tf.float64)

    @tf.function(input_signature=[spec, spec])
    def lm_only(am, lm):
        with tf.GradientTape() as tape:
            tape.watch([am, lm])
            _, lm_p = rnnt_pruned.do_rnnt_pruning(am, lm, ranges)
            loss = tf.reduce_sum(lm_p**2)
        return tape.gradient(
            loss, [am, lm], unconnected_gradients=tf.UnconnectedGradients.ZERO
        )

    d_am, d_lm = lm_only(tf.constant(am), tf.constant(lm))
    np.testing.assert_array_equal(d_am, np.zeros_like(am))
    want = np.zeros_like(lm)
    for b in range(2):
        for rows in ranges[b].numpy():
            want[b, rows] += 2 * lm[b, rows]
    np.testing.assert_allclose(d_lm, want, rtol=1e-12)


def test_pruning_grad_op_names_bad_ranges():
    op = tt.ops._loader.op_library().tf_transducer_rnnt_pruning_grad
    grads = tf.zeros([1, 2, 2, 3])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"ranges must lie in"):
        op(
            grads,
            grads,
            tf.constant([[[0, 1], [4, 5]]], tf.int64),
            tf.constant(5, tf.int64),
        )
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"lm_rows .* >= 1"):
        op(grads, grads, tf.zeros([1, 2, 2], tf.int64), tf.constant(0, tf.int64))
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError), match=r"ranges"):
        op(grads, grads, tf.zeros([1, 2, 3], tf.int64), tf.constant(5, tf.int64))


def test_do_rnnt_pruning_keeps_tensorflows_gradient_under_xla():
    rng = np.random.default_rng(14)
    am, lm = rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 5, 3))
    ranges = tf.constant([[[0, 1], [1, 2], [1, 2], [3, 4]]] * 2, tf.int64)

    def grads(am, lm):
        with tf.GradientTape() as tape:
            tape.watch([am, lm])
            am_p, lm_p = rnnt_pruned.do_rnnt_pruning(am, lm, ranges)
            loss = tf.reduce_sum(am_p * lm_p)
        return tape.gradient(loss, [am, lm])

    eager = grads(tf.constant(am), tf.constant(lm))
    xla = tf.function(grads, jit_compile=True)(tf.constant(am), tf.constant(lm))
    for e, x in zip(eager, xla, strict=True):
        np.testing.assert_allclose(e, x, rtol=1e-12)


@pytest.mark.parametrize("rnnt_type", TYPES)
def test_pruned_loss_with_full_range_equals_the_full_loss(rnnt_type):
    rng = np.random.default_rng(3)
    lm, am, symbols, boundary = simple_problem(rng)
    px_grad, py_grad = occupations(lm, am, symbols, boundary, rnnt_type)
    ranges = rnnt_pruned.get_rnnt_prune_ranges(px_grad, py_grad, boundary, 6)  # S + 1
    am_p, lm_p = rnnt_pruned.do_rnnt_pruning(am, lm, ranges)
    pruned = rnnt_pruned.rnnt_loss_pruned(
        am_p + lm_p, symbols, ranges, 0, boundary, rnnt_type, 0.1, "none"
    )
    logits = am[:, :, np.newaxis] + lm[:, np.newaxis]
    full = rnnt.rnnt_loss(logits, symbols, 0, boundary, rnnt_type, 0.1, "none")
    np.testing.assert_allclose(pruned, full, rtol=1e-10)


@pytest.mark.parametrize("rnnt_type", TYPES)
def test_pruning_only_removes_paths(rnnt_type):
    rng = np.random.default_rng(4)
    lm, am, symbols, boundary = simple_problem(rng)
    px_grad, py_grad = occupations(lm, am, symbols, boundary, rnnt_type)
    ranges = rnnt_pruned.get_rnnt_prune_ranges(px_grad, py_grad, boundary, 3)
    am_p, lm_p = rnnt_pruned.do_rnnt_pruning(am, lm, ranges)
    pruned = rnnt_pruned.rnnt_loss_pruned(
        am_p + lm_p, symbols, ranges, 0, boundary, rnnt_type, reduction="none"
    )
    logits = am[:, :, np.newaxis] + lm[:, np.newaxis]
    full = rnnt.rnnt_loss(logits, symbols, 0, boundary, rnnt_type, reduction="none")
    assert np.all(np.isfinite(pruned))
    assert np.all(pruned.numpy() >= full.numpy() - 1e-9)


def test_simple_loss_with_zero_lm_has_a_closed_form():
    # lm = 0 and one am row for every frame: every symbol and blank has the
    # same probability on every frame, and a regular path chooses the frames
    # of its S symbols as a multiset: C(S + T - 1, S) paths.
    B, T, S, C = 1, 6, 3, 4
    row = np.array([0.3, -1.0, 0.5, 2.0])
    am = np.tile(row, (B, T, 1))
    lm = np.zeros((B, S + 1, C))
    symbols = [[2, 2, 2]]
    p = np.exp(log_softmax(row))
    want = -(T * np.log(p[0]) + S * np.log(p[2]) + math.log(math.comb(S + T - 1, S)))
    got = rnnt.rnnt_loss_simple(lm, am, symbols, 0, reduction="none")
    np.testing.assert_allclose(got, [want], rtol=1e-12)


def test_pruned_loss_gradient():
    rng = np.random.default_rng(5)
    lm, am, symbols, boundary = simple_problem(rng, B=2, T=5, S=3, C=4)
    px_grad, py_grad = occupations(lm, am, symbols, boundary, "regular")
    ranges = rnnt_pruned.get_rnnt_prune_ranges(px_grad, py_grad, boundary, 2)
    am_p, lm_p = rnnt_pruned.do_rnnt_pruning(am, lm, ranges)

    def f(logits):
        return rnnt_pruned.rnnt_loss_pruned(logits, symbols, ranges, 0, boundary)

    analytic, numeric = tf.test.compute_gradient(f, [(am_p + lm_p).numpy()])
    np.testing.assert_allclose(analytic[0], numeric[0], atol=1e-7)


@pytest.mark.parametrize(
    "s_range,rnnt_type,message",
    [(1, "regular", "s_range must be an int >= 2"), (0, "modified", ">= 1")],
)
def test_too_small_s_range_is_rejected(s_range, rnnt_type, message):
    rng = np.random.default_rng(6)
    lm, am, symbols, boundary = simple_problem(rng)
    px_grad, py_grad = occupations(lm, am, symbols, boundary, rnnt_type)
    with pytest.raises(ValueError, match=message):
        rnnt_pruned.get_rnnt_prune_ranges(px_grad, py_grad, boundary, s_range)


@pytest.mark.parametrize("rnnt_type", TYPES)
@pytest.mark.parametrize("jit_compile", [False, True], ids=["op", "xla"])
def test_fused_pruned_loss_matches_the_composite_path(rnnt_type, jit_compile):
    rng = np.random.default_rng(7)
    lm, am, symbols, boundary = simple_problem(rng)
    px_grad, py_grad = occupations(lm, am, symbols, boundary, rnnt_type)
    ranges = rnnt_pruned.get_rnnt_prune_ranges(px_grad, py_grad, boundary, 3)
    am_p, lm_p = rnnt_pruned.do_rnnt_pruning(am, lm, ranges)
    logits = am_p + lm_p
    weights = tf.constant([1.0, -0.5, 2.0], tf.float64)

    def fused(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = rnnt_pruned.rnnt_loss_pruned(
                x, symbols, ranges, 0, boundary, rnnt_type, 0.1, "none"
            )
            total = tf.reduce_sum(loss * weights)
        return loss, tape.gradient(total, x)

    with tf.GradientTape() as tape:
        tape.watch(logits)
        px, py = rnnt_pruned.get_rnnt_logprobs_pruned(
            logits, symbols, ranges, 0, boundary, rnnt_type
        )
        px = rnnt._add_delay_penalty(px, boundary, rnnt_type, 0.1)
        want = -tt.mutual_information_recursion(px, py, boundary)
        total = tf.reduce_sum(want * weights)
    want_grad = tape.gradient(total, logits)
    got, got_grad = tf.function(fused, jit_compile=jit_compile)(logits)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    np.testing.assert_allclose(got_grad, want_grad, atol=1e-10)


def test_non_consecutive_ranges_are_rejected():
    logits = np.zeros((1, 3, 2, 4))
    ranges = np.array([[[0, 1], [0, 2], [1, 2]]])
    with pytest.raises(tf.errors.InvalidArgumentError, match="consecutive"):
        rnnt_pruned.rnnt_loss_pruned(logits, [[1, 2]], ranges, 0)
