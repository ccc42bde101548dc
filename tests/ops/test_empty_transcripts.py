# SPDX-License-Identifier: Apache-2.0
"""Every transcript empty (symbols [B, 0]): each frame emits a blank.

The lattice is one row of blank steps, so the loss of sequence b is, by
hand, minus the sum over its frames of log P(blank), and its gradient with
respect to the logits of a used frame is softmax(l) - onehot(blank) (zero on
padding frames). torchaudio takes such a batch (max_target_length 0).
"""

import numpy as np
import pytest
import tensorflow as tf

import tf_transducer as tt
from tf_transducer.ops import rnnt
from tf_transducer.ops import rnnt_joint
from tf_transducer.ops import rnnt_pruned
from tf_transducer.ops import rnnt_smoothed

B, T, C, J = 3, 5, 6, 4
FRAMES = np.array([5, 3, 1])
NO_LABELS = np.zeros(B, np.int64)
SYMBOLS = np.zeros((B, 0), np.int64)
TYPES = ["regular", "modified", "constrained"]


def log_softmax(x):
    return x - np.log(np.sum(np.exp(x), axis=-1, keepdims=True))


def by_hand(logits, blank=0):
    """(losses [B], d sum(losses) / d logits) of logits [B, T, 1, C]."""
    used = (np.arange(T)[None] < FRAMES[:, None])[:, :, None, None]
    log_p = log_softmax(logits)
    losses = -np.sum(np.where(used, log_p, 0)[..., blank], axis=(1, 2))
    grad = np.exp(log_p)
    grad[..., blank] -= 1
    return losses, np.where(used, grad, 0)


def loss_and_grad(fn, x, jit_compile=False):
    def run(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            losses = fn(x)
            total = tf.reduce_sum(losses)
        return losses, tape.gradient(total, x)

    if jit_compile:
        run = tf.function(run, jit_compile=True)
    losses, grad = run(tf.constant(x))
    return losses.numpy(), grad.numpy()


@pytest.mark.parametrize("rnnt_type", TYPES)
@pytest.mark.parametrize("jit_compile", [False, True], ids=["op", "xla"])
def test_rnnt_loss_is_the_blanks_of_every_frame(rnnt_type, jit_compile):
    logits = np.random.default_rng(0).normal(size=(B, T, 1, C))
    # delay_penalty and FastEmit act on symbol steps only: none here.
    options = dict(rnnt_type=rnnt_type, delay_penalty=0.1, fastemit_lambda=0.3)

    def fn(x):
        return rnnt.rnnt_loss(
            x,
            SYMBOLS,
            2,
            reduction="none",
            logit_lengths=FRAMES,
            label_lengths=NO_LABELS,
            **options,
        )

    losses, grad = loss_and_grad(fn, logits, jit_compile)
    want_losses, want_grad = by_hand(logits, blank=2)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-12)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("jit_compile", [False, True], ids=["op", "xla"])
def test_rnnt_loss_clamps_the_blank_gradient(jit_compile):
    logits = np.random.default_rng(1).normal(size=(B, T, 1, C)) * 3

    def fn(x):
        return rnnt.rnnt_loss(x, SYMBOLS, 0, reduction="none", clamp=0.5)

    _, grad = loss_and_grad(fn, logits, jit_compile)
    want = np.exp(log_softmax(logits))  # no lengths: every frame counts
    want[..., 0] -= 1
    assert np.any(np.abs(want) > 0.5)
    np.testing.assert_allclose(grad, np.clip(want, -0.5, 0.5), rtol=1e-10)


@pytest.mark.parametrize("rnnt_type", TYPES)
@pytest.mark.parametrize("jit_compile", [False, True], ids=["op", "xla"])
def test_rnnt_loss_joint_is_the_blanks_of_every_frame(rnnt_type, jit_compile):
    rng = np.random.default_rng(2)
    encoder = rng.normal(size=(B, T, J))
    predictor, weight = rng.normal(size=(B, 1, J)), rng.normal(size=(J, C))
    bias = rng.normal(size=(C,))
    hidden = np.tanh(encoder[:, :, None] + predictor[:, None])  # [B, T, 1, J]
    logits = hidden @ weight + bias

    def fn(x):
        return rnnt_joint.rnnt_loss_joint(
            x,
            predictor,
            weight,
            bias,
            SYMBOLS,
            1,
            rnnt_type=rnnt_type,
            reduction="none",
            logit_lengths=FRAMES,
            label_lengths=NO_LABELS,
        )

    losses, d_encoder = loss_and_grad(fn, encoder, jit_compile)
    want_losses, d_logits = by_hand(logits, blank=1)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-12)
    # The chain rule through the joint: d hidden = G W^T, times tanh'.
    want = np.sum((d_logits @ weight.T) * (1 - hidden**2), axis=2)
    np.testing.assert_allclose(d_encoder, want, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("rnnt_type", TYPES)
@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_simple_loss_is_the_blanks_of_every_frame(rnnt_type, jit_compile):
    rng = np.random.default_rng(3)
    lm, am = rng.normal(size=(B, 1, C)), rng.normal(size=(B, T, C))

    def fn(x):
        return rnnt.rnnt_loss_simple(
            lm,
            x,
            SYMBOLS,
            0,
            rnnt_type=rnnt_type,
            reduction="none",
            logit_lengths=FRAMES,
            label_lengths=NO_LABELS,
        )

    losses, d_am = loss_and_grad(fn, am, jit_compile)
    want_losses, d_logits = by_hand(am[:, :, None] + lm[:, None])
    np.testing.assert_allclose(losses, want_losses, rtol=1e-12)
    np.testing.assert_allclose(d_am, d_logits[:, :, 0], rtol=1e-10, atol=1e-14)


def test_smoothed_loss_mixes_the_blank_log_probs():
    rng = np.random.default_rng(4)
    lm, am = rng.normal(size=(B, 1, C)), rng.normal(size=(B, T, C))
    got = rnnt_smoothed.rnnt_loss_smoothed(
        lm,
        am,
        SYMBOLS,
        0,
        lm_only_scale=0.25,
        am_only_scale=0.1,
        reduction="none",
        logit_lengths=FRAMES,
        label_lengths=NO_LABELS,
    )
    # log P(blank) of each frame: 0.65 of the joiner's, 0.25 of the LM's
    # alone and 0.1 of the AM's with the LM's unigram (its one row here).
    lm_only = np.exp(log_softmax(lm))  # [B, 1, C]
    unigram = np.mean(lm_only, axis=(0, 1))
    mixed = (
        0.65 * log_softmax(am + lm)[..., 0]
        + 0.25 * log_softmax(lm)[..., 0]
        + 0.1 * log_softmax(am + np.log(unigram))[..., 0]
    )  # [B, T]
    used = np.arange(T)[None] < FRAMES[:, None]
    np.testing.assert_allclose(got, -np.sum(mixed * used, axis=1), rtol=1e-6)


def test_pruned_loss_keeps_the_one_row():
    rng = np.random.default_rng(5)
    lm, am = rng.normal(size=(B, 1, C)), rng.normal(size=(B, T, C))
    boundary = rnnt.boundary_from_lengths(FRAMES, NO_LABELS)
    _, (px_grad, py_grad) = rnnt.rnnt_loss_simple(
        lm, am, SYMBOLS, 0, boundary=boundary, return_grad=True
    )
    ranges = rnnt_pruned.get_rnnt_prune_ranges(px_grad, py_grad, boundary, 5)
    np.testing.assert_array_equal(ranges, np.zeros((B, T, 1)))
    am_pruned, lm_pruned = rnnt_pruned.do_rnnt_pruning(am, lm, ranges)
    logits = am_pruned + lm_pruned  # [B, T, 1, C]

    def fn(x):
        return rnnt_pruned.rnnt_loss_pruned(
            x, SYMBOLS, ranges, 0, boundary=boundary, reduction="none"
        )

    losses, grad = loss_and_grad(fn, logits.numpy())
    want_losses, want_grad = by_hand(logits.numpy())
    np.testing.assert_allclose(losses, want_losses, rtol=1e-12)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize(
    "fn", [tt.mutual_information_recursion, tt.mutual_information_recursion_tf]
)
@pytest.mark.parametrize("modified", [False, True])
def test_recursion_without_symbols_sums_the_blank_steps(fn, modified):
    rng = np.random.default_rng(6)
    px = np.zeros((B, 0, T if modified else T + 1))
    py = rng.normal(size=(B, 1, T))
    boundary = np.stack([0 * FRAMES, 0 * FRAMES, 0 * FRAMES, FRAMES], axis=1)
    scores, (px_grad, py_grad) = fn(px, py, boundary, return_grad=True)
    used = np.arange(T)[None] < FRAMES[:, None]
    np.testing.assert_allclose(scores, np.sum(py[:, 0] * used, axis=1), rtol=1e-12)
    assert px_grad.shape == px.shape
    np.testing.assert_array_equal(py_grad[:, 0], used.astype(float))
