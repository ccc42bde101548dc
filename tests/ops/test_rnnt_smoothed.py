# SPDX-License-Identifier: Apache-2.0
"""The smoothed simple RNN-T loss against a per-cell numpy reference."""

import numpy as np
import pytest
import tensorflow as tf

from tests.ops.mi_reference import mi_reference
from tests.ops.rnnt_reference import smoothed_logprobs_reference
from tf_transducer.ops import rnnt
from tf_transducer.ops import rnnt_smoothed

TYPES = ["regular", "modified", "constrained"]


def problem(rng, B=2, T=6, S=3, C=5):
    lm = rng.normal(size=(B, S + 1, C))
    am = rng.normal(size=(B, T, C)) * 2
    symbols = rng.integers(0, C, size=(B, S))
    boundary = np.array([[0, 0, S, T], [0, 0, S - 1, T - 2]][:B])
    return lm, am, symbols, boundary


@pytest.mark.parametrize("rnnt_type", TYPES)
@pytest.mark.parametrize(
    "scales", [(0.1, 0.1), (0.25, 0.0), (0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (0.5, 0.5)]
)
def test_smoothed_logprobs_match_reference(rnnt_type, scales):
    rng = np.random.default_rng([len(rnnt_type), int(scales[0] * 100)])
    lm, am, symbols, boundary = problem(rng)
    got = rnnt_smoothed.get_rnnt_logprobs_smoothed(
        lm, am, symbols, 1, *scales, boundary=boundary, rnnt_type=rnnt_type
    )
    want = smoothed_logprobs_reference(lm, am, symbols, 1, *scales, boundary, rnnt_type)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("rnnt_type", TYPES)
def test_smoothed_loss_matches_reference(rnnt_type):
    rng = np.random.default_rng(7)
    lm, am, symbols, boundary = problem(rng)
    got, (px_grad, _) = rnnt_smoothed.rnnt_loss_smoothed(
        lm, am, symbols, 1, 0.2, 0.05, boundary, rnnt_type, reduction="none",
        return_grad=True,
    )  # fmt: skip
    px, py = smoothed_logprobs_reference(
        lm, am, symbols, 1, 0.2, 0.05, boundary, rnnt_type
    )
    scores, want_px_grad, _ = mi_reference(px, py, boundary)
    np.testing.assert_allclose(got, -scores, rtol=1e-10)
    np.testing.assert_allclose(px_grad, want_px_grad, atol=1e-10)


def test_zero_smoothing_is_the_simple_loss():
    rng = np.random.default_rng(8)
    lm, am, symbols, boundary = problem(rng)
    smoothed = rnnt_smoothed.rnnt_loss_smoothed(lm, am, symbols, 1, 0.0, 0.0, boundary)
    simple = rnnt.rnnt_loss_simple(lm, am, symbols, 1, boundary)
    np.testing.assert_allclose(smoothed, simple, rtol=1e-12)


def test_smoothed_loss_gradient_matches_finite_differences():
    rng = np.random.default_rng(9)
    lm, am, symbols, boundary = problem(rng, B=2, T=4, S=2, C=3)

    def f(lm, am):
        return rnnt_smoothed.rnnt_loss_smoothed(lm, am, symbols, 1, 0.2, 0.1, boundary)

    analytic, numeric = tf.test.compute_gradient(f, [lm, am])
    for a, n in zip(analytic, numeric, strict=True):
        np.testing.assert_allclose(a, n, atol=1e-7)


def test_lm_only_loss_is_finite_and_matches_the_lm_alone():
    """lm_only_scale = 1: the LM's own log-probs, -inf after the last frame."""
    rng = np.random.default_rng(9)
    lm, am, symbols, boundary = problem(rng)
    got = rnnt_smoothed.rnnt_loss_smoothed(
        lm, am, symbols, 1, 1.0, 0.0, boundary, reduction="none"
    )
    log_lm = lm - np.log(np.exp(lm).sum(-1, keepdims=True))  # [B, S + 1, C]
    B, T = am.shape[:2]
    px = np.take_along_axis(log_lm[:, :-1], symbols[..., None], 2)  # [B, S, 1]
    px = np.concatenate([np.repeat(px, T, 2), np.full(px.shape, -np.inf)], 2)
    for b, t_end in enumerate(boundary[:, 3]):
        px[b, :, t_end] = -np.inf  # no symbol after the last frame
    py = np.repeat(log_lm[:, :, 1:2], T, 2)  # blank 1, [B, S + 1, T]
    scores, _, _ = mi_reference(px, py, boundary)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, -scores, rtol=1e-10)
