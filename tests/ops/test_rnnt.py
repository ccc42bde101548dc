# SPDX-License-Identifier: Apache-2.0
"""RNN-T losses (simple and full) against a numpy lattice reference."""

import numpy as np
import pytest
import tensorflow as tf

import tf_transducer as tt
from tests.ops.rnnt_reference import numerical_gradient
from tests.ops.rnnt_reference import rnnt_loss_reference
from tf_transducer.ops import rnnt
from tf_transducer.ops import rnnt_pruned
from tf_transducer.ops import rnnt_smoothed

TYPES = ["regular", "modified", "constrained"]

# The 1x2x3x5 case used across RNN-T projects (warp-transducer, torchaudio).
ACTS_1235 = np.array(
    [
        [
            [
                [0.1, 0.6, 0.1, 0.1, 0.1],
                [0.1, 0.1, 0.6, 0.1, 0.1],
                [0.1, 0.1, 0.2, 0.8, 0.1],
            ],
            [
                [0.1, 0.6, 0.1, 0.1, 0.1],
                [0.1, 0.1, 0.2, 0.1, 0.1],
                [0.7, 0.1, 0.2, 0.1, 0.1],
            ],
        ]
    ]
)

# B=2, T=4, U=3, V=3 from warp-transducer's TensorFlow binding tests.
ACTS_2433 = np.array(
    [0.065357, 0.787530, 0.081592, 0.529716, 0.750675, 0.754135,
     0.609764, 0.868140, 0.622532, 0.668522, 0.858039, 0.164539,
     0.989780, 0.944298, 0.603168, 0.946783, 0.666203, 0.286882,
     0.094184, 0.366674, 0.736168, 0.166680, 0.714154, 0.399400,
     0.535982, 0.291821, 0.612642, 0.324241, 0.800764, 0.524106,
     0.779195, 0.183314, 0.113745, 0.240222, 0.339470, 0.134160,
     0.505562, 0.051597, 0.640290, 0.430733, 0.829473, 0.177467,
     0.320700, 0.042883, 0.302803, 0.675178, 0.569537, 0.558474,
     0.083132, 0.060165, 0.107958, 0.748615, 0.943918, 0.486356,
     0.418199, 0.652408, 0.024243, 0.134582, 0.366342, 0.295830,
     0.923670, 0.689929, 0.741898, 0.250005, 0.603430, 0.987289,
     0.592606, 0.884672, 0.543450, 0.660770, 0.377128, 0.358021]
).reshape(2, 4, 3, 3)  # fmt: skip


def random_boundary(rng, B, S, T, rnnt_type):
    s_end = rng.integers(1, S + 1, size=B)
    t_end = rng.integers(1, T + 1, size=B)
    if rnnt_type != "regular":
        t_end = np.maximum(t_end, s_end)
    s_end[0], t_end[0] = S, T
    return np.stack([0 * s_end, 0 * s_end, s_end, t_end], 1).astype(np.int64)


def random_problem(rng, B=3, T=6, S=4, C=5):
    logits = rng.normal(size=(B, T, S + 1, C)) * 2
    symbols = rng.integers(1, C, size=(B, S))
    return logits, symbols


def test_known_value_1x2x3x5():
    loss = rnnt.rnnt_loss(ACTS_1235, [[1, 2]], 0, reduction="none")
    np.testing.assert_allclose(loss, [4.495666], rtol=1e-6)


def test_blank_index_is_honoured():
    # The blank-4 loss differs from the blank-0 one (a pure-TF loss in the
    # field returns the blank-0 value here).
    loss = rnnt.rnnt_loss(ACTS_1235, [[1, 2]], 4, reduction="none")
    want = rnnt_loss_reference(ACTS_1235, [[1, 2]], 4)
    np.testing.assert_allclose(loss, want, rtol=1e-10)
    np.testing.assert_allclose(loss, [5.0957], atol=1e-4)


def test_known_values_warp_transducer_2x4x3x3():
    loss = rnnt.rnnt_loss(ACTS_2433, [[1, 2], [1, 1]], 0, reduction="none")
    np.testing.assert_allclose(
        loss, [4.2806528590890736, 3.9384369822503591], rtol=1e-6
    )


@pytest.mark.parametrize("rnnt_type", TYPES)
@pytest.mark.parametrize("with_boundary", [False, True], ids=["full", "boundary"])
@pytest.mark.parametrize("delay_penalty", [0.0, 0.3], ids=["plain", "delay"])
def test_rnnt_loss_matches_reference(rnnt_type, with_boundary, delay_penalty):
    rng = np.random.default_rng([len(rnnt_type), with_boundary])
    logits, symbols = random_problem(rng)
    B, T, S1, _ = logits.shape
    bnd = random_boundary(rng, B, S1 - 1, T, rnnt_type) if with_boundary else None
    got = rnnt.rnnt_loss(
        logits, symbols, 0, bnd, rnnt_type, delay_penalty, reduction="none"
    )
    want = rnnt_loss_reference(logits, symbols, 0, bnd, rnnt_type, delay_penalty)
    np.testing.assert_allclose(got, want, rtol=1e-10)


@pytest.mark.parametrize("rnnt_type", TYPES)
@pytest.mark.parametrize("with_boundary", [False, True], ids=["full", "boundary"])
def test_rnnt_loss_simple_matches_reference(rnnt_type, with_boundary):
    rng = np.random.default_rng([len(rnnt_type), with_boundary, 1])
    B, T, S, C = 3, 7, 4, 6
    lm = rng.normal(size=(B, S + 1, C))
    am = rng.normal(size=(B, T, C))
    symbols = rng.integers(0, C, size=(B, S))
    bnd = random_boundary(rng, B, S, T, rnnt_type) if with_boundary else None
    got = rnnt.rnnt_loss_simple(
        lm, am, symbols, 2, bnd, rnnt_type, delay_penalty=0.2, reduction="none"
    )
    logits = am[:, :, np.newaxis, :] + lm[:, np.newaxis, :, :]
    want = rnnt_loss_reference(logits, symbols, 2, bnd, rnnt_type, 0.2)
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_simple_loss_takes_minus_infinity_in_am_and_lm():
    # A class masked out with -inf is the same as one with exp(x) = 0.
    rng = np.random.default_rng(21)
    lm = rng.normal(size=(2, 4, 6))
    am = rng.normal(size=(2, 5, 6))
    symbols = rng.integers(1, 5, size=(2, 3))
    masked_am, masked_lm = am.copy(), lm.copy()
    masked_am[:, :, 5], masked_lm[0, 1, 5] = -np.inf, -np.inf
    tiny_am, tiny_lm = am.copy(), lm.copy()
    tiny_am[:, :, 5], tiny_lm[0, 1, 5] = -1e4, -1e4
    lm_var, am_var = tf.Variable(masked_lm), tf.Variable(masked_am)
    with tf.GradientTape() as tape:
        got = rnnt.rnnt_loss_simple(lm_var, am_var, symbols, 0, reduction="none")
    grads = tape.gradient(got, [lm_var, am_var])
    want = rnnt.rnnt_loss_simple(tiny_lm, tiny_am, symbols, 0, reduction="none")
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert all(np.all(np.isfinite(g.numpy())) for g in grads)


@pytest.mark.parametrize(
    "loss_fn", [rnnt.rnnt_loss_simple, rnnt_smoothed.rnnt_loss_smoothed]
)
@pytest.mark.parametrize("name", ["lm", "am"])
@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_a_row_of_minus_infinity_in_lm_or_am_is_named(loss_fn, name, graph):
    # Its log-softmax is -inf - -inf: named up front, not as "px must be
    # finite" from inside the recursion.
    rng = np.random.default_rng(22)
    x = {"lm": rng.normal(size=(2, 4, 6)), "am": rng.normal(size=(2, 5, 6))}
    x[name][1] = -np.inf  # the whole second sequence
    symbols = rng.integers(1, 6, size=(2, 3))
    fn = tf.function(loss_fn) if graph else loss_fn
    message = f"{name} must hold a value above -inf in every (row|frame)"
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        fn(x["lm"], x["am"], symbols, 0)


def test_rows_of_minus_infinity_in_the_padding_are_legal():
    # Rows and frames outside each sequence's lengths are never read.
    rng = np.random.default_rng(23)
    lm, am = rng.normal(size=(2, 4, 6)), rng.normal(size=(2, 5, 6))
    symbols = rng.integers(1, 6, size=(2, 3))
    lengths = dict(logit_lengths=[5, 3], label_lengths=[3, 1])
    want = rnnt.rnnt_loss_simple(lm, am, symbols, 0, reduction="none", **lengths)
    lm[1, 2:], am[1, 3:] = -np.inf, -np.inf
    got = rnnt.rnnt_loss_simple(lm, am, symbols, 0, reduction="none", **lengths)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_a_row_of_minus_infinity_is_not_checked_under_xla():
    # XLA runs no assertions: the loss is computed (and not finite).
    rng = np.random.default_rng(24)
    lm, am = rng.normal(size=(2, 4, 6)), rng.normal(size=(2, 5, 6))
    lm[1] = -np.inf
    symbols = rng.integers(1, 6, size=(2, 3))
    fn = tf.function(rnnt.rnnt_loss_simple, jit_compile=True)
    loss = fn(lm, am, symbols, 0, reduction="none")
    assert np.isfinite(loss[0]) and not np.isfinite(loss[1])


@pytest.mark.parametrize("rnnt_type", TYPES)
def test_simple_and_joint_logprobs_agree_on_added_logits(rnnt_type):
    rng = np.random.default_rng(2)
    B, T, S, C = 2, 5, 3, 4
    lm = rng.normal(size=(B, S + 1, C)) * 5  # large values: the max-shifts matter
    am = rng.normal(size=(B, T, C)) * 5
    symbols = rng.integers(0, C, size=(B, S))
    bnd = random_boundary(rng, B, S, T, rnnt_type)
    simple = rnnt.get_rnnt_logprobs(lm, am, symbols, 1, rnnt_type, bnd)
    logits = am[:, :, np.newaxis, :] + lm[:, np.newaxis, :, :]
    joint = rnnt.get_rnnt_logprobs_joint(logits, symbols, 1, bnd, rnnt_type)
    for a, b in zip(simple, joint, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


def test_reductions():
    rng = np.random.default_rng(3)
    logits, symbols = random_problem(rng)
    per_seq = rnnt.rnnt_loss(logits, symbols, 0, reduction="none").numpy()
    assert per_seq.shape == (3,)
    np.testing.assert_allclose(rnnt.rnnt_loss(logits, symbols, 0), per_seq.mean())
    np.testing.assert_allclose(
        rnnt.rnnt_loss(logits, symbols, 0, reduction="sum"), per_seq.sum()
    )


@pytest.mark.parametrize("rnnt_type", TYPES)
def test_rnnt_loss_gradient_matches_the_reference(rnnt_type):
    rng = np.random.default_rng(4)
    logits, symbols = random_problem(rng, B=2, T=4, S=2, C=3)
    bnd = np.array([[0, 0, 2, 4], [0, 0, 1, 3]])
    weights = np.array([1.0, -0.5])
    x = tf.constant(logits)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = rnnt.rnnt_loss(x, symbols, 0, bnd, rnnt_type, 0.1, reduction="none")
        total = tf.reduce_sum(loss * weights)
    got = tape.gradient(total, x).numpy()

    def reference(z):
        return np.sum(weights * rnnt_loss_reference(z, symbols, 0, bnd, rnnt_type, 0.1))

    np.testing.assert_allclose(got, numerical_gradient(reference, logits), atol=1e-7)


@pytest.mark.parametrize("pruned", [False, True], ids=["full", "pruned"])
def test_gradient_written_into_the_logits_buffer_is_right(pruned):
    # Inside a graph whose logits die at the gradient op, the op writes the
    # gradient into the logits' own buffer; values must not change.
    rng = np.random.default_rng(14)
    logits, symbols = random_problem(rng, B=2, T=5, S=3, C=7)
    ranges = np.broadcast_to(np.arange(4), (2, 5, 4))

    def loss_of(z):
        if pruned:
            return rnnt_pruned.rnnt_loss_pruned(z, symbols, ranges, 0, reduction="sum")
        return rnnt.rnnt_loss(z, symbols, 0, reduction="sum")

    @tf.function
    def in_place(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = loss_of(x * 2.0)  # a fresh buffer that only the loss uses
        return tape.gradient(loss, x)

    def reference(z):
        return np.sum(rnnt_loss_reference(2.0 * z, symbols, 0, None, "regular", 0.0))

    np.testing.assert_allclose(
        in_place(tf.constant(logits)), numerical_gradient(reference, logits), atol=1e-7
    )


def test_rnnt_loss_simple_compute_gradient():
    rng = np.random.default_rng(5)
    lm = rng.normal(size=(2, 3, 4))
    am = rng.normal(size=(2, 5, 4))
    symbols = [[1, 3], [2, 2]]

    def f(lm, am):
        return rnnt.rnnt_loss_simple(lm, am, symbols, 0, rnnt_type="modified")

    analytic, numeric = tf.test.compute_gradient(f, [lm, am])
    for a, n in zip(analytic, numeric, strict=True):
        np.testing.assert_allclose(a, n, atol=1e-7)


def test_return_grad_gives_the_occupations_of_the_simple_lattice():
    rng = np.random.default_rng(6)
    lm, am = rng.normal(size=(2, 4, 5)), rng.normal(size=(2, 6, 5))
    symbols = rng.integers(1, 5, size=(2, 3))
    loss, (px_grad, py_grad) = rnnt.rnnt_loss_simple(
        lm, am, symbols, 0, reduction="none", return_grad=True
    )
    assert px_grad.shape == (2, 3, 7) and py_grad.shape == (2, 4, 6)
    # Each path emits all S symbols and T blanks.
    np.testing.assert_allclose(tf.reduce_sum(px_grad, [1, 2]), [3, 3], rtol=1e-10)
    np.testing.assert_allclose(tf.reduce_sum(py_grad, [1, 2]), [6, 6], rtol=1e-10)
    np.testing.assert_allclose(
        loss, rnnt.rnnt_loss_simple(lm, am, symbols, 0, reduction="none")
    )


def test_more_symbols_than_frames_is_legal_for_regular():
    rng = np.random.default_rng(7)
    logits, symbols = random_problem(rng, B=2, T=3, S=5, C=4)
    got = rnnt.rnnt_loss(logits, symbols, 0, reduction="none")
    np.testing.assert_allclose(got, rnnt_loss_reference(logits, symbols, 0), rtol=1e-10)


def test_long_inputs_and_large_logits_stay_finite():
    rng = np.random.default_rng(8)
    logits = (rng.normal(size=(1, 2000, 301, 3)) * 1e3).astype(np.float32)
    symbols = rng.integers(1, 3, size=(1, 300))
    x = tf.constant(logits)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = rnnt.rnnt_loss(x, symbols, 0)
    grad = tape.gradient(loss, x)
    assert np.isfinite(loss.numpy())
    assert np.isfinite(grad.numpy()).all()


# Bad input.


def test_symbols_out_of_range_are_rejected():
    logits = np.zeros((1, 4, 3, 5))
    with pytest.raises(tf.errors.InvalidArgumentError, match="symbols must lie in"):
        rnnt.rnnt_loss(logits, [[1, 5]], 0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="symbols must lie in"):
        rnnt.rnnt_loss_simple(np.zeros((1, 3, 5)), np.zeros((1, 4, 5)), [[-1, 2]], 0)


@pytest.mark.parametrize("rnnt_type", ["modified", "constrained"])
def test_fewer_frames_than_symbols_is_rejected_for_modified(rnnt_type):
    with pytest.raises(ValueError, match="needs T >= S.*T = 2, S = 3"):
        rnnt.rnnt_loss(np.zeros((1, 2, 4, 5)), [[1, 2, 3]], 0, rnnt_type=rnnt_type)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(logits=np.zeros((4, 3, 5))), "logits must have rank 4"),
        (dict(symbols=[[1, 2, 3]]), r"symbols must have shape \[B, S\] = \[1, 2\]"),
        (dict(symbols=[[1.0, 2.0]]), "symbols must be an integer tensor"),
        (dict(termination_symbol=5), r"termination_symbol must lie in \[0, C\)"),
        (dict(rnnt_type="ctc"), "rnnt_type must be one of"),
        (dict(reduction="avg"), "reduction must be one of"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    args = dict(logits=np.zeros((1, 4, 3, 5)), symbols=[[1, 2]], termination_symbol=0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        rnnt.rnnt_loss(**args)


@pytest.mark.parametrize("rnnt_type", TYPES)
def test_losses_run_under_jit_compile(rnnt_type):
    # XLA cannot run the custom op; the losses switch to the pure-TF recursion.
    rng = np.random.default_rng(9)
    logits, symbols = random_problem(rng)
    bnd = random_boundary(rng, 3, 4, 6, rnnt_type)

    def loss_and_grad(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = rnnt.rnnt_loss(x, symbols, 0, bnd, rnnt_type, reduction="sum")
        return loss, tape.gradient(loss, x)

    x = tf.constant(logits)
    jit_loss, jit_grad = tf.function(loss_and_grad, jit_compile=True)(x)
    loss, grad = loss_and_grad(x)
    np.testing.assert_allclose(jit_loss, loss, rtol=1e-10)
    np.testing.assert_allclose(jit_grad, grad, rtol=1e-8, atol=1e-12)


def composite_rnnt_loss(logits, symbols, blank, boundary, rnnt_type, delay_penalty):
    """The unfused path: get_rnnt_logprobs_joint + the MI recursion."""
    px, py = rnnt.get_rnnt_logprobs_joint(logits, symbols, blank, boundary, rnnt_type)
    px = rnnt._add_delay_penalty(px, boundary, rnnt_type, delay_penalty)
    return -tt.mutual_information_recursion(px, py, boundary)


@pytest.mark.parametrize("rnnt_type", TYPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_op_matches_the_composite_path(rnnt_type, dtype):
    rng = np.random.default_rng([len(rnnt_type), 10])
    logits, symbols = random_problem(rng, B=4, T=9, S=5, C=7)
    logits = tf.constant(logits.astype(dtype))
    bnd = random_boundary(rng, 4, 5, 9, rnnt_type)
    weights = tf.constant([1.0, 0.5, -2.0, 3.0], logits.dtype)
    results = []
    for fn in (
        lambda x: rnnt.rnnt_loss(x, symbols, 3, bnd, rnnt_type, 0.1, "none"),
        lambda x: composite_rnnt_loss(x, symbols, 3, bnd, rnnt_type, 0.1),
    ):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            loss = fn(logits)
            total = tf.reduce_sum(loss * weights)
        results.append((loss.numpy(), tape.gradient(total, logits).numpy()))
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-10)
    np.testing.assert_allclose(results[0][0], results[1][0], **tol)
    np.testing.assert_allclose(
        results[0][1], results[1][1], atol=tol.get("atol", 1e-12)
    )


def test_padding_does_not_change_the_loss_or_gradients():
    rng = np.random.default_rng(11)
    logits, symbols = random_problem(rng, B=2, T=5, S=3, C=4)
    bnd = np.array([[0, 0, 3, 5], [0, 0, 2, 4]])
    padded = rng.normal(size=(2, 9, 6, 4)) * 100  # garbage in the padding
    padded[:, :5, :4] = logits
    padded_symbols = np.concatenate([symbols, np.ones((2, 2), np.int64)], 1)

    def loss_and_grad(x, s):
        x = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = rnnt.rnnt_loss(x, s, 0, bnd, reduction="sum")
        return loss.numpy(), tape.gradient(loss, x).numpy()

    loss, grad = loss_and_grad(logits, symbols)
    padded_loss, padded_grad = loss_and_grad(padded, padded_symbols)
    np.testing.assert_allclose(padded_loss, loss, rtol=1e-12)
    np.testing.assert_allclose(padded_grad[:, :5, :4], grad, rtol=1e-10, atol=1e-14)
    outside = np.ones(padded.shape, bool)
    outside[:, :5, :4] = False
    assert not padded_grad[outside].any()


@pytest.mark.parametrize("dtype", [tf.bfloat16, tf.float16])
def test_half_precision_logits_are_computed_in_float32(dtype):
    rng = np.random.default_rng(12)
    logits, symbols = random_problem(rng)
    x = tf.cast(logits, dtype)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = rnnt.rnnt_loss(x, symbols, 0, reduction="none")
    grad = tape.gradient(loss, x)
    assert loss.dtype == tf.float32 and grad.dtype == dtype
    want = rnnt_loss_reference(tf.cast(x, tf.float64).numpy(), symbols, 0)
    np.testing.assert_allclose(loss, want, rtol=1e-5)


@pytest.mark.parametrize("dtype", [tf.bfloat16, tf.float16])
@pytest.mark.parametrize("pruned", [False, True], ids=["full", "pruned"])
@pytest.mark.parametrize("options", [{}, {"clamp": 0.02, "fastemit_lambda": 0.1}])
def test_half_precision_logits_are_read_as_such(dtype, pruned, options):
    # The op reads 16-bit logits without a float32 copy: its loss equals the
    # float32 op's on the same (widened) values bit for bit, and its gradient
    # is the float32 gradient rounded to the logits' dtype.
    rng = np.random.default_rng(14)
    B, T, S, C, R = 3, 6, 3, 7, 2
    symbols = tf.constant(rng.integers(1, C, size=[B, S]), tf.int64)
    rows = R if pruned else S + 1
    x = tf.cast(rng.normal(size=[B, T, rows, C]) * 3, dtype)
    starts = np.minimum(np.arange(T) // 2, S - (R - 1))
    ranges = tf.constant(
        np.broadcast_to(starts[None, :, None] + np.arange(R), [B, T, R]), tf.int64
    )

    def loss_and_grad(logits):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            if pruned:
                loss = rnnt_pruned.rnnt_loss_pruned(
                    logits, symbols, ranges, 0, reduction="none"
                )
            else:
                loss = rnnt.rnnt_loss(logits, symbols, 0, reduction="none", **options)
            loss = loss * tf.constant([1.0, -0.5, 2.0])
        return loss, tape.gradient(loss, logits)

    loss, grad = loss_and_grad(x)
    want_loss, want_grad = loss_and_grad(tf.cast(x, tf.float32))
    assert loss.dtype == tf.float32 and grad.dtype == dtype
    np.testing.assert_array_equal(loss.numpy(), want_loss.numpy())
    np.testing.assert_array_equal(
        tf.cast(grad, tf.float32).numpy(),
        tf.cast(tf.cast(want_grad, dtype), tf.float32).numpy(),
    )


def test_nan_logits_are_rejected():
    logits = np.zeros((2, 4, 3, 5))
    logits[1, 2, 1, 3] = np.nan
    with pytest.raises(tf.errors.InvalidArgumentError, match="logits must be finite"):
        rnnt.rnnt_loss(logits, [[1, 2], [3, 4]], 0)


@pytest.mark.parametrize("jit_compile", [False, True], ids=["op", "xla"])
def test_clamp_limits_each_gradient_element(jit_compile):
    rng = np.random.default_rng(13)
    logits, symbols = random_problem(rng)
    weights = tf.constant([1.0, -2.0, 0.5], tf.float64)

    def grads(clamp):
        def f(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                loss = rnnt.rnnt_loss(x, symbols, 0, reduction="none", clamp=clamp)
                total = tf.reduce_sum(loss * weights)
            return tape.gradient(total, x)

        return tf.function(f, jit_compile=jit_compile)(tf.constant(logits)).numpy()

    free, clamped = grads(-1.0), grads(0.05)
    # Per utterance: clamp(d loss_b / d logits) * weight_b.
    w = weights.numpy()[:, None, None, None]
    np.testing.assert_allclose(clamped, np.clip(free / w, -0.05, 0.05) * w, atol=1e-12)
    assert np.abs(free / w).max() > 0.05  # the clamp did something
    # +inf bounds nothing: the same as torchaudio's "no clamp" (< 0).
    np.testing.assert_array_equal(grads(float("inf")), free)


def test_lengths_are_the_same_as_a_boundary():
    rng = np.random.default_rng(14)
    logits, symbols = random_problem(rng)
    bnd = np.array([[0, 0, 4, 6], [0, 0, 2, 5], [0, 0, 0, 3]])
    by_boundary = rnnt.rnnt_loss(logits, symbols, 0, bnd, reduction="none")
    by_lengths = rnnt.rnnt_loss(
        logits,
        symbols,
        0,
        reduction="none",
        logit_lengths=[6, 5, 3],
        label_lengths=[4, 2, 0],
    )
    np.testing.assert_allclose(by_lengths, by_boundary, rtol=1e-12)
    lm, am = rng.normal(size=(3, 5, 4)), rng.normal(size=(3, 6, 4))
    for fn in (rnnt.rnnt_loss_simple, rnnt_smoothed.rnnt_loss_smoothed):
        np.testing.assert_allclose(
            fn(lm, am, symbols % 4, 0, boundary=bnd, reduction="none"),
            fn(lm, am, symbols % 4, 0, reduction="none",
               logit_lengths=[6, 5, 3], label_lengths=[4, 2, 0]),
            rtol=1e-12,
        )  # fmt: skip


BAD_ARG = tf.errors.InvalidArgumentError


@pytest.mark.parametrize(
    "lengths,error,message",
    [
        (
            dict(logit_lengths=[6, 7, 3], label_lengths=[1, 1, 1]),
            BAD_ARG,
            "logit_lengths",
        ),
        (
            dict(logit_lengths=[6, 6, 6], label_lengths=[1, -1, 1]),
            BAD_ARG,
            "label_lengths",
        ),
        (
            dict(logit_lengths=[6, 6, 6], label_lengths=[1, 5, 1]),
            BAD_ARG,
            "label_lengths",
        ),
        (dict(logit_lengths=[6, 6, 6]), ValueError, "must be given together"),
        (
            dict(
                logit_lengths=[6, 6, 6],
                label_lengths=[1, 1, 1],
                boundary=np.zeros((3, 4)),
            ),
            ValueError,
            "either boundary or",
        ),
    ],
)
def test_bad_lengths_are_named(lengths, error, message):
    rng = np.random.default_rng(15)
    logits, symbols = random_problem(rng)  # T = 6, S = 4
    with pytest.raises(error, match=message):
        rnnt.rnnt_loss(logits, symbols, 0, **lengths)


@pytest.mark.parametrize("rnnt_type", TYPES)
def test_fastemit_scales_the_gradient_through_symbol_steps(rnnt_type):
    # Reference: the composite px / py path, with px's gradient scaled by
    # (1 + lambda) (the loss value unchanged), against the fused op.
    rng = np.random.default_rng(16)
    logits, symbols = random_problem(rng)
    bnd = random_boundary(rng, 3, 4, 6, rnnt_type)
    lam = 0.25
    x = tf.constant(logits)
    with tf.GradientTape() as tape:
        tape.watch(x)
        fused = rnnt.rnnt_loss(
            x, symbols, 0, bnd, rnnt_type, reduction="sum", fastemit_lambda=lam
        )
    fused_grad = tape.gradient(fused, x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        px, py = rnnt.get_rnnt_logprobs_joint(x, symbols, 0, bnd, rnnt_type)
        finite = tf.math.is_finite(px)
        px = tf.where(finite, (1 + lam) * px - lam * tf.stop_gradient(px), px)
        want = -tf.reduce_sum(tt.mutual_information_recursion(px, py, bnd))
    want_grad = tape.gradient(want, x)
    np.testing.assert_allclose(fused, want, rtol=1e-12)
    np.testing.assert_allclose(fused_grad, want_grad, atol=1e-12)
    # ... and the regularisation did change the gradient.
    with tf.GradientTape() as tape:
        tape.watch(x)
        plain = rnnt.rnnt_loss(x, symbols, 0, bnd, rnnt_type, reduction="sum")
    tape_grad = tape.gradient(plain, x)
    assert np.abs(tape_grad - fused_grad).max() > 1e-3


def test_fastemit_under_jit_compile_matches_the_op():
    rng = np.random.default_rng(17)
    logits, symbols = random_problem(rng)

    def grad(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = rnnt.rnnt_loss(x, symbols, 0, reduction="sum", fastemit_lambda=0.5)
        return tape.gradient(loss, x)

    x = tf.constant(logits)
    np.testing.assert_allclose(
        tf.function(grad, jit_compile=True)(x), grad(x), atol=1e-10
    )


def test_losses_trace_with_unknown_shapes():
    rng = np.random.default_rng(18)
    logits, symbols = random_problem(rng)
    spec_logits = tf.TensorSpec([None, None, None, None], tf.float64)
    spec_symbols = tf.TensorSpec([None, None], tf.int64)
    lengths = tf.TensorSpec([None], tf.int64)

    @tf.function(input_signature=[spec_logits, spec_symbols, lengths, lengths])
    def loss(x, s, frames, labels):
        return rnnt.rnnt_loss(
            x, s, 0, reduction="none", logit_lengths=frames, label_lengths=labels
        )

    got = loss(logits, symbols, [6, 5, 4], [4, 3, 2])
    bnd = np.array([[0, 0, 4, 6], [0, 0, 3, 5], [0, 0, 2, 4]])
    np.testing.assert_allclose(
        got, rnnt_loss_reference(logits, symbols, 0, bnd), rtol=1e-10
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match="logit_lengths"):
        loss(logits, symbols, [7, 5, 4], [4, 3, 2])


@pytest.mark.parametrize(
    "fn", [rnnt.rnnt_loss_simple, rnnt_smoothed.rnnt_loss_smoothed]
)
def test_negative_delay_penalty_is_rejected_by_every_loss(fn):
    lm, am = np.zeros((1, 3, 4)), np.zeros((1, 5, 4))
    with pytest.raises(ValueError, match="delay_penalty must be >= 0, got -0.5"):
        fn(lm, am, [[1, 2]], 0, delay_penalty=-0.5)
    with pytest.raises(ValueError, match="delay_penalty must be >= 0"):
        rnnt.rnnt_loss(np.zeros((1, 5, 3, 4)), [[1, 2]], 0, delay_penalty=-0.5)
