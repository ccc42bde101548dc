# SPDX-License-Identifier: Apache-2.0
"""rnnt_loss_joint (the C++ op) against the joint network + rnnt_loss."""

import numpy as np
import pytest
import tensorflow as tf

from tf_transducer.ops import cpu_gemm_paths
from tf_transducer.ops import rnnt
from tf_transducer.ops.rnnt_joint import rnnt_loss_joint

TYPES = ["regular", "modified", "constrained"]
ACTIVATIONS = {"tanh": tf.tanh, "relu": tf.nn.relu, "identity": tf.identity}


def problem(rng, dtype=np.float64, B=3, T=7, S=4, J=5, C=6):
    return dict(
        encoder=tf.constant(rng.normal(size=(B, T, J)), dtype),
        predictor=tf.constant(rng.normal(size=(B, S + 1, J)), dtype),
        weight=tf.constant(rng.normal(size=(J, C)), dtype),
        bias=tf.constant(rng.normal(size=(C,)), dtype),
    )


def unfused(encoder, predictor, weight, bias, symbols, activation, **options):
    """The joiner's logits [B, T, S + 1, C], then the fused logits loss."""
    hidden = ACTIVATIONS[activation](encoder[:, :, None] + predictor[:, None])
    logits = tf.einsum("btsj,jc->btsc", hidden, weight) + bias
    return rnnt.rnnt_loss(logits, symbols, 0, reduction="none", **options)


def losses_and_grads(fn, inputs, symbols, activation, weights, **options):
    """Per-utterance losses and the gradients of sum(weights * losses)."""
    with tf.GradientTape() as tape:
        tape.watch(list(inputs.values()))
        losses = fn(**inputs, symbols=symbols, activation=activation, **options)
        total = tf.reduce_sum(losses * tf.cast(weights, losses.dtype))
    return losses, tape.gradient(total, list(inputs.values()))


def bf16_products(dtype):
    """Whether the CPU ops multiply inputs of this dtype in bfloat16
    (AVX512_BF16; tests/ops/test_cpu_gemm.py), not float32."""
    bfloat16 = tf.as_dtype(dtype) == tf.bfloat16
    return bfloat16 and cpu_gemm_paths().active == "avx512_bf16"


def fused(**kwargs):
    return rnnt_loss_joint(termination_symbol=0, reduction="none", **kwargs)


def assert_same(got, want, rtol):
    (loss, grads), (want_loss, want_grads) = got, want
    np.testing.assert_allclose(loss, want_loss, rtol=rtol)
    for g, w in zip(grads, want_grads, strict=True):
        scale = np.abs(w).max()
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * scale)


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
@pytest.mark.parametrize("rnnt_type", TYPES)
@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-10), (np.float32, 1e-5)])
def test_equals_the_joint_then_the_loss(activation, rnnt_type, dtype, rtol):
    rng = np.random.default_rng([len(activation), len(rnnt_type), rtol < 1e-6])
    inputs = problem(rng, dtype)
    symbols = rng.integers(0, 6, (3, 4))
    options = dict(
        rnnt_type=rnnt_type, logit_lengths=[7, 5, 4], label_lengths=[4, 2, 0]
    )
    weights = [1.0, 2.0, -0.5]
    got = losses_and_grads(fused, inputs, symbols, activation, weights, **options)
    want = losses_and_grads(unfused, inputs, symbols, activation, weights, **options)
    assert_same(got, want, rtol)


@pytest.mark.parametrize(
    "options",
    [
        dict(clamp=0.05),
        dict(fastemit_lambda=0.3),
        dict(delay_penalty=0.2),
        dict(boundary=[[0, 0, 4, 7], [1, 2, 3, 6], [0, 0, 0, 1]]),
        dict(clamp=0.1, fastemit_lambda=0.1, delay_penalty=0.1, rnnt_type="modified"),
    ],
)
def test_options_act_as_on_the_logits_loss(options):
    rng = np.random.default_rng(len(str(options)))
    inputs = problem(rng)
    symbols = rng.integers(0, 6, (3, 4))
    weights = [1.0, -1.0, 3.0]
    got = losses_and_grads(fused, inputs, symbols, "tanh", weights, **options)
    want = losses_and_grads(unfused, inputs, symbols, "tanh", weights, **options)
    assert_same(got, want, 1e-10)
    if "clamp" in options:  # the clamp acted
        free = losses_and_grads(unfused, inputs, symbols, "tanh", weights)
        assert not np.allclose(got[1][2], free[1][2])


def test_one_frame_and_one_symbol():
    rng = np.random.default_rng(3)
    inputs = problem(rng, B=1, T=1, S=1, J=2, C=3)
    got = losses_and_grads(fused, inputs, [[2]], "tanh", [1.0])
    want = losses_and_grads(unfused, inputs, [[2]], "tanh", [1.0])
    assert_same(got, want, 1e-12)


def test_gradients_match_central_differences():
    rng = np.random.default_rng(4)
    inputs = problem(rng, B=2, T=3, S=2, J=3, C=4)
    symbols = [[1, 3], [2, 0]]

    def loss(*values):
        args = dict(zip(inputs, values, strict=True))
        return tf.reduce_sum(fused(**args, symbols=symbols, rnnt_type="modified"))

    theoretical, numerical = tf.test.compute_gradient(loss, list(inputs.values()))
    for t, n in zip(theoretical, numerical, strict=True):
        np.testing.assert_allclose(t, n, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16])
def test_16_bit_inputs_are_computed_in_float32(dtype):
    rng = np.random.default_rng(5)
    inputs = {k: tf.cast(v, dtype) for k, v in problem(rng).items()}
    wide = {k: tf.cast(v, tf.float32) for k, v in inputs.items()}
    symbols = rng.integers(0, 6, (3, 4))
    loss, grads = losses_and_grads(fused, inputs, symbols, "tanh", [1.0] * 3)
    want, want_grads = losses_and_grads(fused, wide, symbols, "tanh", [1.0] * 3)
    assert loss.dtype == tf.float32
    assert all(g.dtype == dtype for g in grads)
    if bf16_products(dtype):
        assert_same((loss, grads), (want, want_grads), 2e-2)
        return
    np.testing.assert_allclose(loss, want, rtol=1e-6)
    for g, w in zip(grads, want_grads, strict=True):
        np.testing.assert_array_equal(g, tf.cast(w, dtype))


def test_traced_with_unknown_dimensions():
    rng = np.random.default_rng(6)
    inputs = problem(rng)
    symbols = rng.integers(0, 6, (3, 4))
    specs = [tf.TensorSpec([None] * len(v.shape), tf.float64) for v in inputs.values()]

    @tf.function(input_signature=[*specs, tf.TensorSpec([None, None], tf.int64)])
    def traced(encoder, predictor, weight, bias, symbols):
        return fused(
            encoder=encoder,
            predictor=predictor,
            weight=weight,
            bias=bias,
            symbols=symbols,
            logit_lengths=[7, 6, 2],
            label_lengths=[4, 1, 2],
        )

    want = unfused(
        **inputs,
        symbols=symbols,
        activation="tanh",
        logit_lengths=[7, 6, 2],
        label_lengths=[4, 1, 2],
    )
    np.testing.assert_allclose(traced(*inputs.values(), symbols), want, rtol=1e-12)


def test_padding_may_hold_nan_but_used_cells_may_not():
    rng = np.random.default_rng(7)
    inputs = problem(rng)
    symbols = rng.integers(0, 6, (3, 4))
    lengths = dict(logit_lengths=[7, 5, 4], label_lengths=[4, 2, 0])
    want = fused(**inputs, symbols=symbols, **lengths)
    encoder = inputs["encoder"].numpy()
    encoder[1, 5:] = np.nan  # past logit_lengths
    predictor = inputs["predictor"].numpy()
    predictor[2, 1:] = np.inf  # past label_lengths
    padded = dict(inputs, encoder=encoder, predictor=predictor)
    np.testing.assert_allclose(fused(**padded, symbols=symbols, **lengths), want)
    encoder[0, 3, 1] = np.nan
    with pytest.raises(tf.errors.InvalidArgumentError, match="encoder, predictor"):
        fused(**padded, symbols=symbols, **lengths)


@pytest.mark.parametrize(
    "change,message",
    [
        (dict(predictor=np.zeros((3, 4, 5))), "symbols must have shape"),
        (dict(predictor=np.zeros((2, 5, 5))), "must agree in B"),
        (dict(weight=np.zeros((4, 6))), "encoder .* and weight .* must agree in J"),
        (dict(bias=np.zeros(5)), "weight .* and bias .* must agree in C"),
        (dict(bias=np.zeros(6, np.float32)), "bias must have the dtype of encoder"),
        (dict(weight=np.zeros((5, 6, 1))), "weight must have rank 2"),
        (dict(activation="gelu"), "activation must be one of"),
        (dict(termination_symbol=6), "termination_symbol must lie in"),
        (dict(symbols=[[0, 1, 2, 6]] * 3), "symbols must lie in"),
        (dict(encoder=np.zeros((3, 3, 5)), rnnt_type="modified"), "needs T >= S"),
        (dict(clamp=float("nan")), "clamp must be a number"),
        (dict(allow_tf32=1), "allow_tf32 must be True or False, got 1"),
    ],
)
def test_bad_inputs_are_named(change, message):
    inputs = {k: v.numpy() for k, v in problem(np.random.default_rng(8)).items()}
    args = dict(inputs, symbols=[[0, 1, 2, 3]] * 3, termination_symbol=0)
    args.update(change)
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError), match=message):
        rnnt_loss_joint(**args)


def test_many_tiles_per_sequence():
    # About 384 cells make a tile: 200 frames of 4 rows are three tiles per
    # sequence, spread over the threads' shards.
    rng = np.random.default_rng(9)
    inputs = problem(rng, B=2, T=200, S=3, J=4, C=5)
    symbols = rng.integers(0, 5, (2, 3))
    options = dict(logit_lengths=[200, 150], label_lengths=[3, 2])
    got = losses_and_grads(fused, inputs, symbols, "tanh", [1.0, 0.5], **options)
    want = losses_and_grads(unfused, inputs, symbols, "tanh", [1.0, 0.5], **options)
    assert_same(got, want, 1e-10)


def test_allow_tf32_reaches_both_ops_and_the_cpu_multiplies_exactly():
    # TF32 is a GPU choice (docs/guides/gpu.md): the CPU kernels ignore it,
    # bit for bit, and the gradient op is given it with the forward's attrs.
    rng = np.random.default_rng(10)
    inputs = problem(rng, np.float32)
    symbols = rng.integers(1, 6, (3, 4))
    exact = losses_and_grads(fused, inputs, symbols, "tanh", [1.0, 2.0, 0.5])
    tf32 = losses_and_grads(
        fused, inputs, symbols, "tanh", [1.0, 2.0, 0.5], allow_tf32=True
    )
    for got, want in zip([tf32[0], *tf32[1]], [exact[0], *exact[1]], strict=True):
        np.testing.assert_array_equal(got, want)

    @tf.function
    def loss_and_grads(*values):
        with tf.GradientTape() as tape:
            tape.watch(values)
            loss = rnnt_loss_joint(*values, symbols, 0, allow_tf32=True)
        return loss, tape.gradient(loss, values)

    graph = loss_and_grads.get_concrete_function(*inputs.values()).graph
    joint_ops = [
        op
        for op in graph.get_operations()
        if op.type.startswith("TfTransducerRnntJoint")
    ]
    assert {op.type for op in joint_ops} == {
        "TfTransducerRnntJointLoss",
        "TfTransducerRnntJointLossGrad",
    }
    assert all(op.get_attr("allow_tf32") for op in joint_ops)
