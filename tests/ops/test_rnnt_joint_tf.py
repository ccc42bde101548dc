# SPDX-License-Identifier: Apache-2.0
"""joint_scores_tf, the XLA path of rnnt_loss_joint, against the joint network
+ rnnt_loss and against the C++ op."""

import re

import numpy as np
import pytest
import tensorflow as tf

from tests.ops.test_rnnt_joint import ACTIVATIONS
from tests.ops.test_rnnt_joint import TYPES
from tests.ops.test_rnnt_joint import bf16_products
from tests.ops.test_rnnt_joint import problem
from tests.ops.test_rnnt_joint import unfused
from tf_transducer.ops import rnnt
from tf_transducer.ops import rnnt_joint
from tf_transducer.ops import rnnt_joint_tf
from tf_transducer.ops.rnnt_joint import rnnt_loss_joint
from tf_transducer.ops.rnnt_joint_tf import chunk_frames
from tf_transducer.ops.rnnt_joint_tf import joint_scores_tf

# Padded batches: a sequence with no labels, one with a single frame.
LENGTHS = dict(logit_lengths=[7, 5, 1], label_lengths=[4, 2, 0])
WEIGHTS = [1.0, 2.0, -0.5]  # d loss / d per-utterance loss


def op_path(**kwargs):
    """rnnt_loss_joint outside XLA: the C++ op."""
    return rnnt_loss_joint(termination_symbol=0, reduction="none", **kwargs)


def pure(encoder, predictor, weight, bias, symbols, activation, **options):
    """joint_scores_tf called directly: the per-utterance losses."""
    lengths = [options.pop(k, None) for k in ("logit_lengths", "label_lengths")]
    if lengths[0] is not None:
        options["boundary"] = rnnt.boundary_from_lengths(*lengths)
    options = dict(
        dict(rnnt_type="regular", delay_penalty=0.0, clamp=-1.0, fastemit_lambda=0.0),
        **options,
    )
    return -joint_scores_tf(
        encoder,
        predictor,
        weight,
        bias,
        tf.cast(symbols, tf.int64),
        options.pop("boundary", None),
        termination_symbol=0,
        activation=activation,
        **options,
    )


def losses_and_grads(fn, inputs, symbols, activation, jit=False, **options):
    """Per-utterance losses and the gradients of sum(WEIGHTS * losses).

    With jit, inside tf.function(jit_compile=True): rnnt_loss_joint takes
    its XLA path there.
    """

    def run(*values):
        args = dict(zip(inputs, values, strict=True))
        with tf.GradientTape() as tape:
            tape.watch(values)
            losses = fn(**args, symbols=symbols, activation=activation, **options)
            total = tf.reduce_sum(losses * tf.cast(WEIGHTS, losses.dtype))
        return losses, tape.gradient(total, list(values))

    if jit:
        run = tf.function(run, jit_compile=True)
    return run(*inputs.values())


def assert_same(got, want, rtol):
    (loss, grads), (want_loss, want_grads) = got, want
    np.testing.assert_allclose(loss, want_loss, rtol=rtol)
    assert len(grads) == len(want_grads) == 4
    for g, w in zip(grads, want_grads, strict=True):
        assert g.dtype == w.dtype
        scale = np.abs(w).max()
        assert scale > 0
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * scale)


@pytest.fixture
def calls(monkeypatch):
    """Counts the calls of joint_scores_tf made by rnnt_loss_joint."""
    count = []
    real = rnnt_joint_tf.joint_scores_tf

    def spy(*args, **kwargs):
        count.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(rnnt_joint, "joint_scores_tf", spy)
    return count


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
@pytest.mark.parametrize("rnnt_type", TYPES)
@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-10), (np.float32, 1e-5)])
def test_xla_path_equals_the_joint_then_the_loss(
    activation, rnnt_type, dtype, rtol, calls
):
    rng = np.random.default_rng([len(activation), len(rnnt_type), rtol < 1e-6])
    inputs = problem(rng, dtype)
    symbols = rng.integers(0, 6, (3, 4))
    options = dict(rnnt_type=rnnt_type, **LENGTHS)
    got = losses_and_grads(op_path, inputs, symbols, activation, jit=True, **options)
    assert len(calls) == 1  # the XLA path ran
    want = losses_and_grads(unfused, inputs, symbols, activation, **options)
    assert_same(got, want, rtol)


@pytest.mark.parametrize("chunk_size", [1, 3, 7, 16])
@pytest.mark.parametrize("rnnt_type", TYPES)
def test_eager_chunks_equal_the_joint_then_the_loss(rnnt_type, chunk_size):
    rng = np.random.default_rng([chunk_size, len(rnnt_type)])
    inputs = problem(rng)
    symbols = rng.integers(0, 6, (3, 4))
    options = dict(rnnt_type=rnnt_type, **LENGTHS)
    got = losses_and_grads(
        pure, inputs, symbols, "tanh", chunk_size=chunk_size, **options
    )
    want = losses_and_grads(unfused, inputs, symbols, "tanh", **options)
    assert_same(got, want, 1e-10)


OPTIONS = [
    dict(clamp=0.05),
    dict(fastemit_lambda=0.3),
    dict(delay_penalty=0.2),
    dict(boundary=[[0, 0, 4, 7], [1, 2, 3, 6], [0, 0, 0, 1]]),
    dict(fastemit_lambda=0.3, rnnt_type="constrained", **LENGTHS),
    dict(clamp=0.1, fastemit_lambda=0.1, delay_penalty=0.1, rnnt_type="modified"),
    dict(
        clamp=0.07,
        delay_penalty=0.3,
        boundary=[[0, 1, 3, 6], [0, 0, 4, 7], [2, 3, 2, 3]],
    ),
]


@pytest.mark.parametrize(
    "options,activation",
    [(o, ("tanh", "relu", "identity")[i % 3]) for i, o in enumerate(OPTIONS)],
    ids=lambda o: ",".join(sorted(o)) if isinstance(o, dict) else o,
)
def test_options_in_chunks_under_xla(options, activation):
    """chunk_size 3 < T = 7: three chunks, T padded to 9."""
    rng = np.random.default_rng([len(str(options)), len(activation)])
    inputs = problem(rng)
    symbols = rng.integers(0, 6, (3, 4))
    got = losses_and_grads(
        pure, inputs, symbols, activation, jit=True, chunk_size=3, **options
    )
    want = losses_and_grads(unfused, inputs, symbols, activation, **options)
    assert_same(got, want, 1e-10)
    assert_same(
        got, losses_and_grads(op_path, inputs, symbols, activation, **options), 1e-10
    )
    if "clamp" in options:  # the clamp acted
        free = {k: v for k, v in options.items() if k != "clamp"}
        unclamped = losses_and_grads(unfused, inputs, symbols, activation, **free)
        assert not np.allclose(got[1][2], unclamped[1][2])


@pytest.mark.parametrize("options", OPTIONS[:3], ids=lambda o: ",".join(sorted(o)))
def test_float32_options_under_xla(options):
    rng = np.random.default_rng(len(str(options)))
    inputs = problem(rng, np.float32)
    symbols = rng.integers(0, 6, (3, 4))
    got = losses_and_grads(
        pure, inputs, symbols, "tanh", jit=True, chunk_size=2, **options
    )
    want = losses_and_grads(unfused, inputs, symbols, "tanh", **options)
    assert_same(got, want, 1e-5)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("rnnt_type", TYPES)
def test_xla_path_equals_the_op(rnnt_type, reduction, calls):
    rng = np.random.default_rng([len(reduction), len(rnnt_type)])
    inputs = problem(rng, np.float32, T=8, J=6, C=7)
    symbols = rng.integers(1, 7, (3, 4))
    options = dict(
        rnnt_type=rnnt_type,
        logit_lengths=[8, 6, 4],
        label_lengths=[3, 4, 1],
        delay_penalty=0.05,
        fastemit_lambda=0.2,
        clamp=0.3,
    )

    def loss(**kwargs):
        return rnnt_loss_joint(termination_symbol=0, reduction=reduction, **kwargs)

    def run(*values):
        with tf.GradientTape() as tape:
            tape.watch(values)
            value = loss(
                **dict(zip(inputs, values, strict=True)), symbols=symbols, **options
            )
            weights = WEIGHTS if reduction == "none" else 1.0
            total = tf.reduce_sum(value * tf.cast(weights, value.dtype))
        return value, tape.gradient(total, list(values))

    got = tf.function(run, jit_compile=True)(*inputs.values())
    assert len(calls) == 1
    want = run(*inputs.values())
    assert len(calls) == 1  # the op ran
    assert_same(got, want, 1e-5)


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16])
def test_16_bit_inputs_are_computed_in_float32(dtype):
    rng = np.random.default_rng(5)
    inputs = {k: tf.cast(v, dtype) for k, v in problem(rng).items()}
    wide = {k: tf.cast(v, tf.float32) for k, v in inputs.items()}
    symbols = rng.integers(0, 6, (3, 4))
    loss, grads = losses_and_grads(
        pure, inputs, symbols, "tanh", jit=True, chunk_size=3, **LENGTHS
    )
    want, want_grads = losses_and_grads(
        pure, wide, symbols, "tanh", jit=True, chunk_size=3, **LENGTHS
    )
    assert loss.dtype == tf.float32
    np.testing.assert_allclose(loss, want, rtol=1e-6)
    for g, w in zip(grads, want_grads, strict=True):
        assert g.dtype == dtype
        np.testing.assert_array_equal(g, tf.cast(w, dtype))
    op_loss, op_grads = losses_and_grads(op_path, inputs, symbols, "tanh", **LENGTHS)
    np.testing.assert_allclose(
        loss, op_loss, rtol=2e-3 if bf16_products(dtype) else 1e-5
    )
    for g, w in zip(grads, op_grads, strict=True):
        np.testing.assert_allclose(
            tf.cast(g, tf.float32), tf.cast(w, tf.float32), rtol=0.02, atol=1e-2
        )


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "xla"])
def test_padding_is_never_read(jit):
    rng = np.random.default_rng(7)
    inputs = problem(rng)
    symbols = rng.integers(0, 6, (3, 4))
    lengths = dict(logit_lengths=[7, 5, 4], label_lengths=[4, 2, 0])
    want = losses_and_grads(op_path, inputs, symbols, "identity", **lengths)
    encoder = inputs["encoder"].numpy()
    encoder[1, 5:] = np.nan  # past logit_lengths
    predictor = inputs["predictor"].numpy()
    predictor[2, 1:] = np.inf  # past label_lengths
    padded = dict(
        inputs, encoder=tf.constant(encoder), predictor=tf.constant(predictor)
    )
    got = losses_and_grads(
        pure, padded, symbols, "identity", jit=jit, chunk_size=2, **lengths
    )
    assert_same(got, want, 1e-10)
    np.testing.assert_array_equal(got[1][0][1, 5:], 0.0)
    np.testing.assert_array_equal(got[1][1][2, 1:], 0.0)


def test_gradients_match_central_differences():
    rng = np.random.default_rng(4)
    inputs = problem(rng, B=2, T=3, S=2, J=3, C=4)
    symbols = [[1, 3], [2, 0]]

    def loss(*values):
        args = dict(zip(inputs, values, strict=True))
        losses = pure(
            **args, symbols=symbols, activation="tanh", rnnt_type="constrained",
            delay_penalty=0.1, chunk_size=2,
        )  # fmt: skip
        return tf.reduce_sum(losses * [1.0, -2.0])

    theoretical, numerical = tf.test.compute_gradient(
        loss, list(inputs.values()), delta=1e-5
    )
    for t, n in zip(theoretical, numerical, strict=True):
        np.testing.assert_allclose(t, n, rtol=1e-6, atol=1e-8)


def test_one_frame_and_one_symbol():
    rng = np.random.default_rng(3)
    inputs = problem(rng, B=1, T=1, S=1, J=2, C=3)
    got = losses_and_grads(pure, inputs, [[2]], "tanh", jit=True, chunk_size=4)
    want = losses_and_grads(unfused, inputs, [[2]], "tanh")
    assert_same(got, want, 1e-12)


@pytest.mark.parametrize("jit", [False, True], ids=["graph", "xla"])
@pytest.mark.parametrize("chunk_size", [None, 3])
def test_traced_with_unknown_dimensions(chunk_size, jit):
    rng = np.random.default_rng(6)
    inputs = problem(rng)
    symbols = rng.integers(0, 6, (3, 4))
    specs = [tf.TensorSpec([None] * len(v.shape), tf.float64) for v in inputs.values()]

    @tf.function(
        jit_compile=jit,
        input_signature=[*specs, tf.TensorSpec([None, None], tf.int64)],
    )
    def traced(encoder, predictor, weight, bias, symbols):
        with tf.GradientTape() as tape:
            tape.watch([encoder, predictor, weight, bias])
            losses = pure(
                encoder, predictor, weight, bias, symbols, "tanh",
                chunk_size=chunk_size, **LENGTHS,
            )  # fmt: skip
            total = tf.reduce_sum(losses * tf.cast(WEIGHTS, losses.dtype))
        return losses, tape.gradient(total, [encoder, predictor, weight, bias])

    got = traced(*inputs.values(), symbols)
    want = losses_and_grads(unfused, inputs, symbols, "tanh", **LENGTHS)
    assert_same(got, want, 1e-10)


def test_the_compiled_loss_never_holds_the_logits_or_the_hidden():
    """In the HLO of loss and gradients: [B, 2, S + 1, C] tiles, never T frames."""
    B, T, S, J, C = 2, 8, 3, 5, 7
    rng = np.random.default_rng(9)
    inputs = problem(rng, B=B, T=T, S=S, J=J, C=C)
    symbols = rng.integers(1, C, (B, S))

    def run(*values):
        with tf.GradientTape() as tape:
            tape.watch(values)
            losses = pure(*values, symbols, "tanh", chunk_size=2)
        return losses, tape.gradient(losses, list(values))

    hlo = tf.function(run, jit_compile=True).experimental_get_compiler_ir(
        *inputs.values()
    )(stage="hlo")
    shapes = set(re.findall(r"f64\[([\d,]*)\]", hlo))
    assert f"{B},2,{S + 1},{C}" in shapes and f"{B},2,{S + 1},{J}" in shapes
    full = {f"{B},{T},{S + 1},{C}", f"{B},{T},{S + 1},{J}"}
    assert not shapes & full
    # Nothing of T (S + 1) C values in any layout either.
    assert all(
        np.prod([int(d) for d in s.split(",") if d]) < T * (S + 1) * C for s in shapes
    ), sorted(shapes)
    got = tf.function(run, jit_compile=True)(*inputs.values())
    want = unfused(**inputs, symbols=symbols, activation="tanh")
    np.testing.assert_allclose(got[0], want, rtol=1e-10)


def test_chunk_size_is_chosen_to_bound_a_chunk():
    def shapes(B, T, S, J, C):
        return (
            tf.TensorSpec([B, T, J]),
            tf.TensorSpec([B, None if S is None else S + 1, J]),
            tf.TensorSpec([J, C]),
        )

    def frames(*dims):
        return chunk_frames(None, *shapes(*dims))

    assert frames(3, 7, 4, 5, 6) == 7  # small: one chunk of all frames
    assert frames(3, None, 4, 5, 6) == rnnt_joint_tf.CHUNK_VALUES // (3 * 5 * 6)
    big = frames(32, 500, 100, 640, 1024)
    assert big * 32 * 101 * 1024 <= rnnt_joint_tf.CHUNK_VALUES
    assert (big + 1) * 32 * 101 * 1024 > rnnt_joint_tf.CHUNK_VALUES
    assert frames(8, 20, 100, 4096, 1 << 20) == 1  # at least one frame
    assert frames(None, 50, 4, 5, 6) == rnnt_joint_tf.DEFAULT_CHUNK_FRAMES
    assert frames(None, 5, 4, 5, 6) == 5
    assert chunk_frames(3, *shapes(3, 7, 4, 5, 6)) == 3


@pytest.mark.parametrize("chunk_size", [0, -2, 2.5, True, "4"])
def test_chunk_size_must_be_a_positive_integer(chunk_size):
    inputs = problem(np.random.default_rng(10))
    with pytest.raises(ValueError, match="chunk_size must be a positive integer"):
        pure(
            **inputs,
            symbols=[[1, 2, 3, 4]] * 3,
            activation="tanh",
            chunk_size=chunk_size,
        )
