# SPDX-License-Identifier: Apache-2.0
"""The TDT losses beyond `tdt_loss`: simple (trivial joiner), pruned, and
fused with the joint network; each against `tdt_loss` or every path of the
lattice, their C++ ops against their pure-TF twins, and the arguments they
refuse."""

import numpy as np
import pytest
import tensorflow as tf

import tf_transducer as tt
from tests.ops.tdt_reference import tdt_loss_reference
from tests.ops.test_rnnt_joint import bf16_products
from tf_transducer.ops import _loader

B, T, S, C, J = 3, 7, 4, 6, 5
FRAMES = np.array([7, 4, 5])
LABELS = np.array([4, 2, 0])
LENGTHS = dict(logit_lengths=FRAMES, label_lengths=LABELS)
BOUNDARY = np.stack([0 * FRAMES, 0 * FRAMES, LABELS, FRAMES], 1)
DURATION_SETS = [[0, 1, 2], [0, 1, 3], [0, 1, 2, 3, 4]]


def _gradients(fn, *inputs, jit=False):
    """(value, gradients of every input) of fn(*inputs)."""

    def run(*xs):
        with tf.GradientTape() as tape:
            tape.watch(xs)
            value = fn(*xs)
        return value, tape.gradient(value, list(xs))

    if jit:
        run = tf.function(run, jit_compile=True)
    value, grads = run(*[tf.constant(x) for x in inputs])
    return value.numpy(), [g.numpy() for g in grads]


def _simple_inputs(k, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(B, S + 1, C)), rng.normal(size=(B, T, C)),
            rng.normal(size=(B, S + 1, k)), rng.normal(size=(B, T, k)),
            rng.integers(1, C, size=(B, S)))  # fmt: skip


def _trivial_joiner(lm, am, lm_durs, am_durs):
    return am[:, :, None] + lm[:, None], am_durs[:, :, None] + lm_durs[:, None]


@pytest.mark.parametrize("durations", DURATION_SETS)
@pytest.mark.parametrize("jit", [False, True])
def test_simple_loss_is_the_loss_of_the_trivial_joiner(durations, jit):
    lm, am, lm_durs, am_durs, symbols = _simple_inputs(len(durations))
    tokens, durs = _trivial_joiner(lm, am, lm_durs, am_durs)
    want = tdt_loss_reference(tokens, durs, symbols, 0, durations, FRAMES, LABELS,
                              0.1)  # fmt: skip

    def simple(*xs):
        return tt.tdt_loss_simple(*xs, symbols, 0, durations, sigma=0.1,
                                  reduction="sum", **LENGTHS)  # fmt: skip

    def full(*xs):
        tokens, durs = _trivial_joiner(*xs)
        return tt.tdt_loss(tokens, durs, symbols, 0, durations, sigma=0.1,
                           reduction="sum", **LENGTHS)  # fmt: skip

    got, grads = _gradients(simple, lm, am, lm_durs, am_durs, jit=jit)
    np.testing.assert_allclose(got, want.sum(), rtol=1e-9)
    _, want_grads = _gradients(full, lm, am, lm_durs, am_durs)
    for g, w in zip(grads, want_grads, strict=True):
        np.testing.assert_allclose(g, w, atol=1e-6)


@pytest.mark.parametrize("jit", [False, True])
def test_simple_occupations_are_the_full_ops(jit):
    durations = [0, 1, 2]
    lm, am, lm_durs, am_durs, symbols = _simple_inputs(3, seed=1)
    tokens, durs = _trivial_joiner(lm, am, lm_durs, am_durs)
    _, px_grad, py_grad, *_ = _loader.op_library().tf_transducer_tdt_loss(
        token_logits=tokens, duration_logits=durs, symbols=symbols,
        logit_lengths=FRAMES, label_lengths=LABELS, blank=0,
        durations=durations, Tacc=tf.float64,
    )  # fmt: skip

    def occupations():
        return tt.tdt_loss_simple(lm, am, lm_durs, am_durs, symbols, 0, durations,
                                  return_grad=True, **LENGTHS)[1]  # fmt: skip

    if jit:
        occupations = tf.function(occupations, jit_compile=True)
    got_px, got_py = occupations()
    np.testing.assert_allclose(got_px, px_grad, atol=1e-9)
    np.testing.assert_allclose(got_py, py_grad, atol=1e-9)


def _pruned_problem(s_range, durations, seed=2):
    """Ranges from the simple loss, and the full and pruned logits."""
    lm, am, lm_durs, am_durs, symbols = _simple_inputs(len(durations), seed)
    _, (px_grad, py_grad) = tt.tdt_loss_simple(
        lm, am, lm_durs, am_durs, symbols, 0, durations, return_grad=True, **LENGTHS
    )
    ranges = tt.get_tdt_prune_ranges(px_grad, py_grad, BOUNDARY, s_range).numpy()
    rng = np.random.default_rng(seed)
    tokens = rng.normal(size=(B, T, S + 1, C))
    durs = rng.normal(size=(B, T, S + 1, len(durations)))
    pick = ranges[..., None]
    return (tokens, durs, symbols, ranges,
            np.take_along_axis(tokens, pick, axis=2),
            np.take_along_axis(durs, pick, axis=2))  # fmt: skip


def test_prune_ranges_keep_a_path_and_move_forward():
    for s_range in (2, 3, S + 1):
        *_, ranges, _, _ = _pruned_problem(s_range, [0, 1, 2])
        assert ranges.shape == (B, T, s_range)
        np.testing.assert_array_equal(np.diff(ranges, axis=2), 1)
        assert (np.diff(ranges[..., 0], axis=1) >= 0).all()
        assert (ranges[:, 0, 0] == 0).all()
        for b in range(B):  # the last frame reaches the last symbol
            assert ranges[b, FRAMES[b] - 1, -1] >= LABELS[b]


@pytest.mark.parametrize("s_range", [2, 3, S + 1])
@pytest.mark.parametrize("durations", DURATION_SETS[:2])
def test_pruned_loss_is_the_loss_without_the_pruned_nodes(s_range, durations):
    tokens, durs, symbols, ranges, pruned_tokens, pruned_durs = _pruned_problem(
        s_range, durations
    )
    kept = np.zeros((B, T, S + 1), bool)
    np.put_along_axis(kept, ranges, True, axis=2)
    # A node outside the ranges takes no step: its blank and label -inf.
    reference_tokens = tokens.copy()
    for b, t, u in zip(*np.nonzero(~kept), strict=True):
        reference_tokens[
            b, t, u, [0, symbols[b, min(u, S - 1)] if u < S else 0]
        ] = -np.inf
    want = tdt_loss_reference(reference_tokens, durs, symbols, 0, durations, FRAMES,
                              LABELS)  # fmt: skip
    assert np.isfinite(want).all()
    got = tt.tdt_loss_pruned(pruned_tokens, pruned_durs, symbols, ranges, 0,
                             durations, reduction="none", **LENGTHS)  # fmt: skip
    np.testing.assert_allclose(got, want, rtol=1e-9)
    if s_range == S + 1:  # nothing pruned
        full = tt.tdt_loss(tokens, durs, symbols, 0, durations, reduction="none",
                           **LENGTHS)  # fmt: skip
        np.testing.assert_allclose(got, full, rtol=1e-9)


@pytest.mark.parametrize(
    "options", [{}, {"sigma": 0.1, "fastemit_lambda": 0.2}, {"clamp": 0.05}]
)
def test_pruned_op_and_its_xla_twin_agree(options):
    *_, symbols, ranges, tokens, durs = _pruned_problem(2, [0, 1, 3])

    def loss(tokens, durs):
        return tt.tdt_loss_pruned(tokens, durs, symbols, ranges, 0, [0, 1, 3],
                                  reduction="sum", **LENGTHS, **options)  # fmt: skip

    value, grads = _gradients(loss, tokens, durs)
    twin_value, twin_grads = _gradients(loss, tokens, durs, jit=True)
    np.testing.assert_allclose(value, twin_value, rtol=1e-9)
    for g, w in zip(grads, twin_grads, strict=True):
        np.testing.assert_allclose(g, w, atol=1e-9)


def _joint_inputs(k, dtype=np.float64, seed=3):
    rng = np.random.default_rng(seed)
    shapes = ((B, T, J), (B, S + 1, J), (J, C), (C,), (J, k), (k,))
    return [rng.normal(size=s).astype(dtype) for s in shapes]


def _unfused(activation):
    def joint(encoder, predictor, weight, bias, duration_weight, duration_bias):
        h = encoder[:, :, None] + predictor[:, None]
        h = {"tanh": tf.tanh, "relu": tf.nn.relu}.get(activation, tf.identity)(h)
        return (
            tf.einsum("btuj,jc->btuc", h, weight) + bias,
            tf.einsum("btuj,jk->btuk", h, duration_weight) + duration_bias,
        )

    return joint


JOINT_OPTIONS = [
    {},
    {"sigma": 0.1, "omega": 0.3},
    {"clamp": 0.05, "fastemit_lambda": 0.2},
]
ACTIVATIONS = ["tanh", "relu", "identity"]


# Every activation with every option set eagerly; under XLA (seconds a case
# to compile) each activation and each option set once.
@pytest.mark.parametrize(
    "activation,options,jit",
    [(a, o, False) for a in ACTIVATIONS for o in JOINT_OPTIONS]
    + [(a, o, True) for a, o in zip(ACTIVATIONS, JOINT_OPTIONS, strict=True)],
)
def test_joint_loss_is_the_loss_of_the_joints_logits(activation, options, jit):
    durations = [0, 1, 2, 4]
    inputs = _joint_inputs(len(durations))
    symbols = np.random.default_rng(4).integers(1, C, size=(B, S))
    kwargs = dict(reduction="sum", **LENGTHS, **options)

    def fused(*xs):
        return tt.tdt_loss_joint(*xs, symbols, 2, durations, activation, **kwargs)

    def unfused(*xs):
        tokens, durs = _unfused(activation)(*xs)
        return tt.tdt_loss(tokens, durs, symbols, 2, durations, **kwargs)

    value, grads = _gradients(fused, *inputs, jit=jit)
    want, want_grads = _gradients(unfused, *inputs)
    np.testing.assert_allclose(value, want, rtol=1e-9)
    for g, w in zip(grads, want_grads, strict=True):
        np.testing.assert_allclose(g, w, atol=1e-8)


@pytest.mark.parametrize("dtype", [np.float16, tf.bfloat16.as_numpy_dtype])
def test_joint_loss_reads_16_bit_inputs(dtype):
    durations = [0, 1, 2]
    inputs = _joint_inputs(3, dtype)
    symbols = np.random.default_rng(5).integers(1, C, size=(B, S))
    value, grads = _gradients(
        lambda *xs: tt.tdt_loss_joint(*xs, symbols, 0, durations, **LENGTHS), *inputs
    )
    wide = [x.astype(np.float32) for x in inputs]
    want, want_grads = _gradients(
        lambda *xs: tt.tdt_loss_joint(*xs, symbols, 0, durations, **LENGTHS), *wide
    )
    assert value.dtype == np.float32
    rtol = 2e-3 if bf16_products(dtype) else 1e-5
    np.testing.assert_allclose(value, want, rtol=rtol)
    for g, w, x in zip(grads, want_grads, inputs, strict=True):
        assert g.dtype == x.dtype
        np.testing.assert_allclose(g.astype(np.float32), w, atol=0.05, rtol=0.05)


def test_joint_loss_with_unknown_dimensions():
    durations = [0, 1, 2]
    inputs = _joint_inputs(3, np.float32)
    symbols = np.random.default_rng(6).integers(1, C, size=(B, S))
    spec = [tf.TensorSpec([None] * x.ndim, tf.float32) for x in inputs]
    spec += [tf.TensorSpec([None, None], tf.int64)] * 1

    @tf.function(input_signature=spec)
    def loss(*xs):
        return tt.tdt_loss_joint(*xs, 0, durations, reduction="none", **LENGTHS)

    got = loss(*inputs, symbols)
    want = tt.tdt_loss_joint(*inputs, symbols, 0, durations, reduction="none",
                             **LENGTHS)  # fmt: skip
    np.testing.assert_allclose(got, want, rtol=1e-6)


def _bad_calls():
    durations = [0, 1, 2]
    lm, am, lm_durs, am_durs, symbols = _simple_inputs(3)
    inputs = _joint_inputs(3)
    *_, ranges, tokens, durs = _pruned_problem(2, durations)
    bad_ranges = ranges.copy()
    bad_ranges[0, 1, 1] = bad_ranges[0, 1, 0]
    return {
        "simple K": (lambda: tt.tdt_loss_simple(
            lm, am, lm_durs[..., :2], am_durs, symbols, 0, durations),
            "lm_durations"),
        "simple T": (lambda: tt.tdt_loss_simple(
            lm, am, lm_durs, am_durs[:, :3], symbols, 0, durations),
            "am_durations"),
        "simple durations": (lambda: tt.tdt_loss_simple(
            lm, am, lm_durs, am_durs, symbols, 0, [1, 2, 3]), "durations"),
        "pruned ranges": (lambda: tt.tdt_loss_pruned(
            tokens, durs, symbols, bad_ranges, 0, durations), "ranges"),
        "pruned rows": (lambda: tt.tdt_loss_pruned(
            tokens, durs[:, :, :1], symbols, ranges, 0, durations),
            "duration_logits"),
        "joint K": (lambda: tt.tdt_loss_joint(
            *inputs[:4], inputs[4][:, :2], inputs[5], symbols, 0, durations),
            "duration_weight"),
        "joint J": (lambda: tt.tdt_loss_joint(
            *inputs[:4], inputs[4][:2], inputs[5], symbols, 0, durations),
            "duration_weight"),
        "joint dtype": (lambda: tt.tdt_loss_joint(
            *inputs[:5], inputs[5].astype(np.float32), symbols, 0, durations),
            "duration_bias"),
        "joint omega": (lambda: tt.tdt_loss_joint(
            *inputs, symbols, 0, durations, omega=1.5), "omega"),
    }  # fmt: skip


@pytest.mark.parametrize("name", list(_bad_calls()))
def test_bad_input_is_named(name):
    call, argument = _bad_calls()[name]
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError), match=argument):
        call()
