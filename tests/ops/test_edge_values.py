# SPDX-License-Identifier: Apache-2.0
"""Extreme and illegal values: the right answer, or an error naming the argument.

Cases found by fuzzing the public API: large log-weights, half precision,
NaN where it is and is not read, out-of-range lengths, ranges and options.
"""

import numpy as np
import pytest
import tensorflow as tf

import tf_transducer as tt
from tf_transducer.ops import _loader

B, T, S, C = 2, 10, 3, 6


def simple_problem(seed, scale=1.0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    lm = (rng.uniform(-1, 1, (B, S + 1, C)) * scale).astype(dtype)
    am = (rng.uniform(-1, 1, (B, T, C)) * scale).astype(dtype)
    return lm, am, rng.integers(1, C, (B, S))


@pytest.mark.parametrize("loss", [tt.rnnt_loss_simple, tt.rnnt_loss_smoothed])
def test_large_float32_inputs_give_finite_gradients_and_the_float64_loss(loss):
    # exp(lm - max) @ exp(am - max)^T underflows in float32 for some (s, t)
    # at this scale; those log-probs are computed again in float64.
    for seed in range(30):
        lm, am, symbols = simple_problem(seed, scale=100.0)
        lm_t, am_t = tf.constant(lm), tf.constant(am)
        with tf.GradientTape() as tape:
            tape.watch([lm_t, am_t])
            value = loss(lm_t, am_t, symbols, 0)
        grads = tape.gradient(value, [lm_t, am_t])
        assert all(np.isfinite(g.numpy()).all() for g in grads), seed
        exact = loss(lm.astype(np.float64), am.astype(np.float64), symbols, 0)
        np.testing.assert_allclose(value, exact, rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float16, tf.bfloat16.as_numpy_dtype])
def test_half_precision_simple_losses_are_computed_in_float32(dtype):
    lm, am, symbols = simple_problem(1, scale=3.0, dtype=np.float64)
    half_lm, half_am = lm.astype(dtype), am.astype(dtype)
    # The reference: the same (rounded) inputs in float64.
    for loss, kwargs in (
        (tt.rnnt_loss_simple, {}),
        (tt.rnnt_loss_smoothed, dict(lm_only_scale=0.25, am_only_scale=0.0)),
    ):
        got = loss(half_lm, half_am, symbols, 0, reduction="none", **kwargs)
        want = loss(
            half_lm.astype(np.float64),
            half_am.astype(np.float64),
            symbols,
            0,
            reduction="none",
            **kwargs,
        )
        assert got.dtype == tf.float32
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_xla_recursion_keeps_occupations_at_most_one_for_huge_weights():
    px = tf.constant(np.full((1, 2, 4), 1e10, np.float32))
    py = tf.constant(np.full((1, 3, 3), 1e10, np.float32))
    grads = []
    for fn in (tt.mutual_information_recursion, tt.mutual_information_recursion_tf):
        with tf.GradientTape() as tape:
            tape.watch(px)
            score = fn(px, py)
        grads.append(tape.gradient(score, px).numpy())
    assert np.isfinite(grads[1]).all() and grads[1].max() <= 1.0
    np.testing.assert_allclose(grads[1], grads[0], atol=1e-6)


def test_overflowing_score_is_plus_infinity_not_nan():
    px = np.full((1, 2, 4), 3e38, np.float32)
    py = np.full((1, 3, 3), 3e38, np.float32)
    for fn in (tt.mutual_information_recursion, tt.mutual_information_recursion_tf):
        assert fn(px, py).numpy()[0] == np.inf


def logits_and_symbols(seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(B, 5, S + 1, C)).astype(np.float32), rng.integers(
        1, C, (B, S)
    )


@pytest.mark.parametrize("where", ["one row", "everywhere"])
def test_nan_logits_are_an_error_also_in_whole_rows(where):
    logits, symbols = logits_and_symbols()
    if where == "one row":
        logits[0, 1, 2, :] = np.nan
    else:
        logits[:] = np.nan
    with pytest.raises(tf.errors.InvalidArgumentError, match="logits must be finite"):
        tt.rnnt_loss(logits, symbols, 0)


def test_nan_in_padding_is_never_read():
    logits, symbols = logits_and_symbols()
    lengths = dict(logit_lengths=[5, 3], label_lengths=[3, 2])
    want = tt.rnnt_loss(logits, symbols, 0, reduction="none", **lengths)
    logits[1, 3:] = np.nan  # frames past 3
    logits[1, :, 3:] = np.nan  # rows past label 2
    got = tt.rnnt_loss(logits, symbols, 0, reduction="none", **lengths)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    lm, am, symbols = simple_problem(2)
    want = tt.rnnt_loss_smoothed(lm, am, symbols, 0, reduction="none", **lengths)
    lm[1, 3:], am[1, 3:] = np.nan, 1e30
    got = tt.rnnt_loss_smoothed(lm, am, symbols, 0, reduction="none", **lengths)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_padding_labels_left_in_symbols_are_named_with_their_place():
    logits, _ = logits_and_symbols()
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r"symbols must lie in \[0, C\) with C = 6; got -1 at \[b, s\] = "
        r"\[1, 2\]",
    ):
        tt.rnnt_loss(logits, [[1, 2, 3], [1, 1, -1]], 0)
    traced = tf.function(lambda s: tt.rnnt_loss(logits, s, 0))
    with pytest.raises(tf.errors.InvalidArgumentError, match="symbols must lie in"):
        traced(tf.constant([[1, 2, 3], [1, 1, -1]]))


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(reduction=None), r"reduction must be one of .*got None"),
        (dict(fastemit_lambda=float("nan")), "fastemit_lambda must be finite"),
        (dict(fastemit_lambda=-0.1), "fastemit_lambda must be >= 0"),
        (dict(clamp=float("nan")), "clamp must be a number"),
        (dict(clamp="1"), "clamp must be a real number"),
        (dict(delay_penalty=float("inf")), "delay_penalty must be finite"),
        (dict(delay_penalty="0.1"), "delay_penalty must be a real number"),
        (dict(boundary=[[0, 0, 3, 5.5], [0, 0, 2, 4]]), "boundary must be an integer"),
        (
            dict(logit_lengths=[5.0, 4.5], label_lengths=[3, 2]),
            "logit_lengths must be an integer",
        ),
        (
            dict(logit_lengths=[5, 4, 3], label_lengths=[3, 2]),
            "logit_lengths .* and label_lengths .* must have the same size",
        ),
    ],
)
def test_bad_options_are_value_errors_naming_them(kwargs, message):
    logits, symbols = logits_and_symbols()
    with pytest.raises(ValueError, match=message):
        tt.rnnt_loss(logits, symbols, 0, **kwargs)


@pytest.mark.parametrize(
    "lengths,message",
    [
        (dict(logit_lengths=[6, 5], label_lengths=[3, 2]), r"logit_lengths must lie "
         r"in \[0, T = 5\]; got 6 at index 0"),
        (dict(logit_lengths=[5, 5], label_lengths=[3, -1]), r"label_lengths must lie "
         r"in \[0, S = 3\]; got -1 at index 1"),
    ],
)  # fmt: skip
def test_lengths_out_of_range_are_named(lengths, message):
    logits, symbols = logits_and_symbols()
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        tt.rnnt_loss(logits, symbols, 0, **lengths)


def test_nan_in_lm_or_am_names_them_not_px():
    lm, am, symbols = simple_problem(3)
    lm[0, 1, 2] = np.nan
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"lm must be finite or -inf; got nan"
    ):
        tt.rnnt_loss_simple(lm, am, symbols, 0)
    lm, am, symbols = simple_problem(3)
    am[1, 0, 0] = np.inf
    with pytest.raises(tf.errors.InvalidArgumentError, match="am must be finite"):
        tt.rnnt_loss_smoothed(lm, am, symbols, 0)


def test_prune_ranges_check_the_boundary():
    lm, am, symbols = simple_problem(4)
    _, (px_grad, py_grad) = tt.rnnt_loss_simple(lm, am, symbols, 0, return_grad=True)
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"s_end <= S = 3.*got \[0, 0, 5, 10\]"
    ):
        tt.get_rnnt_prune_ranges(px_grad, py_grad, [[0, 0, 5, 10], [0, 0, 3, 10]], 2)
    with pytest.raises(ValueError, match="s_range must be an int >= 2 for regular"):
        tt.get_rnnt_prune_ranges(px_grad, py_grad, [[0, 0, 3, 10]] * 2, 1)
    with pytest.raises(ValueError, match="boundary must be an integer tensor"):
        tt.get_rnnt_prune_ranges(px_grad, py_grad, [[0.0, 0, 3, 10]] * 2, 2)


def test_ranges_out_of_range_are_named_and_do_not_wrap():
    lm, am, symbols = simple_problem(5)
    huge = np.broadcast_to(np.array([2**63 - 2, 2**63 - 1]), (B, T, 2))
    for call in (
        lambda: tt.do_rnnt_pruning(am, lm, huge),
        lambda: tt.rnnt_loss_pruned(
            np.zeros((B, T, 2, C), np.float32), symbols, huge, 0
        ),
    ):
        with pytest.raises(
            tf.errors.InvalidArgumentError, match="ranges must hold consecutive"
        ):
            call()
    # The kernel checks without overflow too (the Python check bypassed).
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"ranges\[0, 0\]"):
        _loader.op_library().tf_transducer_rnnt_loss_pruned(
            logits=np.zeros((B, T, 2, C), np.float32),
            symbols=symbols.astype(np.int64),
            ranges=huge,
            boundary=np.array([[0, 0, S, T]] * B, np.int64),
            delay_penalty=np.float32(0),
            termination_symbol=0,
            rnnt_type="regular",
        )
