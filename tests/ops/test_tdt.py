# SPDX-License-Identifier: Apache-2.0
"""tdt_loss: the fused op and its pure-TF twin against every path of the
lattice, their gradients against central differences and each other, and
the arguments they refuse."""

import numpy as np
import pytest
import tensorflow as tf

from tests.ops.rnnt_reference import numerical_gradient
from tests.ops.tdt_reference import tdt_loss_reference
from tf_transducer.ops import rnnt_loss
from tf_transducer.ops import tdt_loss

B, T, S, C = 3, 6, 3, 5
FRAMES = np.array([6, 3, 4])
LABELS = np.array([3, 1, 0])
DURATION_SETS = [[0, 1, 2, 3, 4], [0, 1], [0, 1, 3], [0, 1, 2, 5]]


def batch(durations, seed=0, frames=T, symbols=S):
    rng = np.random.default_rng(seed)
    k = len(durations)
    tokens = rng.normal(size=(B, frames, symbols + 1, C))
    durs = rng.normal(size=(B, frames, symbols + 1, k))
    labels = rng.integers(1, C, size=(B, symbols))
    return tokens, durs, labels


def with_gradients(fn, tokens, durs, jit=False):
    """(loss, d loss / d tokens, d loss / d durs) of fn(tokens, durs)."""

    def run(a, b):
        with tf.GradientTape() as tape:
            tape.watch([a, b])
            loss = fn(a, b)
        return loss, *tape.gradient(loss, [a, b])

    if jit:
        run = tf.function(run, jit_compile=True)
    return [x.numpy() for x in run(tf.constant(tokens), tf.constant(durs))]


@pytest.mark.parametrize("durations", DURATION_SETS)
@pytest.mark.parametrize("sigma", [0.0, 0.25])
def test_the_loss_is_the_sum_over_every_path(durations, sigma):
    tokens, durs, labels = batch(durations)
    want = tdt_loss_reference(tokens, durs, labels, 0, durations, FRAMES, LABELS, sigma)
    kwargs = dict(sigma=sigma, reduction="none", logit_lengths=FRAMES,
                  label_lengths=LABELS)  # fmt: skip
    got = tdt_loss(tokens, durs, labels, 0, durations, **kwargs)
    # sigma is a float32 attribute of the op: 1e-8 from float64's.
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    twin = tf.function(
        lambda a, b: tdt_loss(a, b, labels, 0, durations, **kwargs), jit_compile=True
    )
    np.testing.assert_allclose(twin(tokens, durs), want, rtol=0, atol=1e-10)


def test_padding_does_not_change_the_loss():
    durations = [0, 1, 2]
    tokens, durs, labels = batch(durations)
    kwargs = dict(reduction="none", logit_lengths=FRAMES, label_lengths=LABELS)
    clean = tdt_loss(tokens, durs, labels, 0, durations, **kwargs).numpy()
    used_t = np.arange(T)[None, :, None, None] < FRAMES[:, None, None, None]
    used_u = np.arange(S + 1)[None, None, :, None] <= LABELS[:, None, None, None]
    noise = np.where(used_t & used_u, 0.0, 1e3)
    padded_labels = np.where(np.arange(S)[None] < LABELS[:, None], labels, C - 1)
    dirty = tdt_loss(
        tokens + noise, durs + noise, padded_labels, 0, durations, **kwargs
    )
    np.testing.assert_allclose(dirty, clean, rtol=1e-12)


@pytest.mark.parametrize("durations", [[0, 1, 2, 3], [0, 1, 3]])
def test_gradients_of_both_logits_by_central_differences(durations):
    tokens, durs, labels = batch(durations, seed=3, frames=4, symbols=2)
    frames, symbols = np.array([4, 2, 3]), np.array([2, 1, 0])
    weights = np.array([1.0, -2.0, 0.5])

    def loss(a, b):
        lengths = dict(logit_lengths=frames, label_lengths=symbols)
        per = tdt_loss(
            a, b, labels, 0, durations, reduction="none", sigma=0.1, **lengths
        )
        return tf.reduce_sum(per * weights)

    _, d_tokens, d_durs = with_gradients(loss, tokens, durs)
    np.testing.assert_allclose(
        d_tokens, numerical_gradient(lambda x: loss(x, durs).numpy(), tokens), atol=1e-6
    )
    np.testing.assert_allclose(
        d_durs, numerical_gradient(lambda x: loss(tokens, x).numpy(), durs), atol=1e-6
    )


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"clamp": 0.05},
        {"fastemit_lambda": 0.5},
        {"sigma": 0.3, "reduction": "mean"},
    ],
)
def test_the_op_and_its_xla_twin_agree(options):
    durations = [0, 1, 2, 4]
    tokens, durs, labels = batch(durations, seed=5)
    kwargs = dict(dict(reduction="sum", logit_lengths=FRAMES, label_lengths=LABELS),
                  **options)  # fmt: skip

    def fn(a, b):
        return tdt_loss(a, b, labels, 0, durations, **kwargs)

    fused, twins = (
        with_gradients(fn, tokens, durs),
        with_gradients(fn, tokens, durs, True),
    )
    for op, xla in zip(fused, twins, strict=True):
        np.testing.assert_allclose(op, xla, rtol=1e-7, atol=1e-9)


def test_fastemit_keeps_the_value_and_scales_label_steps():
    durations = [0, 1, 2]
    tokens, durs, labels = batch(durations, seed=2)
    kwargs = dict(logit_lengths=FRAMES, label_lengths=LABELS, reduction="sum")
    plain = with_gradients(lambda a, b: tdt_loss(a, b, labels, 0, durations, **kwargs),
                           tokens, durs)  # fmt: skip
    kwargs["fastemit_lambda"] = 0.5
    fast = with_gradients(lambda a, b: tdt_loss(a, b, labels, 0, durations, **kwargs),
                          tokens, durs)  # fmt: skip
    assert fast[0] == pytest.approx(plain[0])
    assert np.abs(fast[1] - plain[1]).max() > 1e-3


def test_clamp_bounds_every_gradient_element():
    durations = [0, 1, 2]
    tokens, durs, labels = batch(durations, seed=4)
    _, d_tokens, d_durs = with_gradients(
        lambda a, b: tdt_loss(a, b, labels, 0, durations, clamp=0.01, reduction="sum"),
        tokens * 5, durs * 5,
    )  # fmt: skip
    assert np.abs(d_tokens).max() <= 0.01 + 1e-12
    assert np.abs(d_durs).max() <= 0.01 + 1e-12


def test_omega_mixes_in_the_rnnt_loss_of_the_token_logits():
    durations = [0, 1, 2]
    tokens, durs, labels = batch(durations, seed=6)
    kwargs = dict(reduction="none", logit_lengths=FRAMES, label_lengths=LABELS)
    tdt = tdt_loss(tokens, durs, labels, 0, durations, sigma=0.2, **kwargs)
    rnnt = rnnt_loss(tokens, labels, 0, **kwargs) + 0.2 * (FRAMES + LABELS)
    mixed = tdt_loss(tokens, durs, labels, 0, durations, sigma=0.2, omega=0.3, **kwargs)
    np.testing.assert_allclose(mixed, 0.7 * tdt + 0.3 * rnnt, rtol=1e-6)


def test_empty_transcripts_emit_blanks_only():
    durations = [0, 1, 2]
    tokens, durs, _ = batch(durations, symbols=0)
    got = tdt_loss(tokens, durs, np.zeros((B, 0), np.int64), 0, durations,
                   reduction="none", logit_lengths=FRAMES)  # fmt: skip
    want = tdt_loss_reference(tokens, durs, np.zeros((B, 0), np.int64), 0, durations,
                              FRAMES, np.zeros(B, np.int64))  # fmt: skip
    np.testing.assert_allclose(got, want, atol=1e-6)


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16])
def test_16_bit_logits_are_read_as_such(dtype):
    durations = [0, 1, 2]
    tokens, durs, labels = batch(durations, seed=7)
    low = [tf.cast(x, dtype) for x in (tokens, durs)]
    exact = tdt_loss(*[tf.cast(x, tf.float32) for x in low], labels, 0, durations)
    loss, d_tokens, d_durs = with_gradients(
        lambda a, b: tdt_loss(a, b, labels, 0, durations), *low
    )
    assert loss.dtype == np.float32 and loss == pytest.approx(float(exact), rel=1e-6)
    assert d_tokens.dtype == dtype.as_numpy_dtype and d_durs.dtype == d_tokens.dtype


def test_a_tf_function_with_unknown_dimensions():
    durations = [0, 1, 2]
    spec = tf.TensorSpec([None, None, None, None], tf.float32)
    ints = tf.TensorSpec([None, None], tf.int64)

    @tf.function(input_signature=[spec, spec, ints, tf.TensorSpec([None], tf.int32)])
    def loss(tokens, durs, labels, frames):
        return tdt_loss(tokens, durs, labels, 0, durations, logit_lengths=frames)

    for frames, symbols in ((6, 3), (4, 1)):
        tokens, durs, labels = batch(durations, frames=frames, symbols=symbols)
        lengths = np.array([frames, frames - 1, 1], np.int32)
        want = tdt_loss_reference(tokens, durs, labels, 0, durations, lengths,
                                  np.full(B, symbols)).mean()  # fmt: skip
        assert float(loss(tokens.astype(np.float32), durs.astype(np.float32), labels,
                          lengths)) == pytest.approx(want, rel=1e-5)  # fmt: skip


BAD = [
    (dict(durations=[1, 2]), "durations must hold 0 and 1"),
    (dict(durations=[0, 2]), "durations must hold 0 and 1"),
    (dict(durations=[1, 0]), "durations must be sorted"),
    (dict(durations=[0, 1, 1]), "durations must be distinct"),
    (dict(durations=[-1, 0, 1]), "durations must be >= 0"),
    (dict(durations=[0, 1.0]), "durations must be a list of ints"),
    (dict(durations="01"), "durations must be a list of ints"),
    (dict(durations=[0, 1, 2, 3]), "duration_logits must have K = len.durations. = 4"),
    (dict(blank=5), r"blank must lie in \[0, C\) with C = 5"),
    (dict(omega=1.5), r"omega must lie in \[0, 1\]"),
    (dict(sigma=-0.1), "sigma must be >= 0"),
    (dict(reduction="avg"), "reduction must be one of"),
    (dict(logit_lengths=[6, 0, 2]), r"logit_lengths must lie in \[1, 6\]"),
    (dict(logit_lengths=[6, 7, 2]), r"logit_lengths must lie in \[1, 6\]"),
    (dict(label_lengths=[3, 4, 0]), r"label_lengths must lie in \[0, 3\]"),
    (dict(symbols=np.full((B, S), 5)), r"symbols must lie in \[0, C\)"),
    (dict(duration_logits=np.zeros((B, T, S, 3))), "must share .B, T, S . 1. with"),
    (dict(duration_logits=np.zeros((B, T, S + 1, 3), np.float32)),
     "duration_logits must have the dtype of token_logits"),
]  # fmt: skip


@pytest.mark.parametrize("change,message", BAD)
def test_bad_input_is_named(change, message):
    durations = [0, 1, 2]
    tokens, durs, labels = batch(durations)
    args = dict(token_logits=tokens, duration_logits=durs, symbols=labels, blank=0,
                durations=durations)  # fmt: skip
    args.update(change)
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError), match=message):
        tdt_loss(**args)


def test_nan_logits_are_refused_not_returned():
    durations = [0, 1, 2]
    tokens, durs, labels = batch(durations)
    tokens[1, 0, 0, 2] = np.nan
    with pytest.raises(tf.errors.InvalidArgumentError, match="utterance 1 has a NaN"):
        tdt_loss(tokens, durs, labels, 0, durations)


def test_rows_of_minus_infinity_take_no_step():
    """A node whose token (or duration) logits are all -inf has no step out:
    the same loss as a node whose blank and label alone are -inf, and a
    finite gradient (log_softmax of such a row is NaN; the op's is -inf)."""
    durations = [0, 1, 2]
    tokens, durs, labels = batch(durations)
    tokens[0, 2, 1, :] = -np.inf
    durs[0, 1, 2, :] = -np.inf
    want_tokens = tokens.copy()
    for t, u in ((2, 1), (1, 2)):
        want_tokens[0, t, u, :] = 0.0
        want_tokens[0, t, u, [0, labels[0, u] if u < S else 0]] = -np.inf
    want_durs = np.where(np.isinf(durs), 0.0, durs)
    want = tdt_loss_reference(
        want_tokens, want_durs, labels, 0, durations, FRAMES, LABELS
    )
    loss, d_tokens, d_durs = with_gradients(
        lambda a, b: tdt_loss(a, b, labels, 0, durations, reduction="sum",
                              logit_lengths=FRAMES, label_lengths=LABELS),
        tokens, durs,
    )  # fmt: skip
    np.testing.assert_allclose(loss, want.sum(), rtol=1e-6)
    assert np.isfinite(d_tokens).all() and np.isfinite(d_durs).all()
