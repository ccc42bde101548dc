# SPDX-License-Identifier: Apache-2.0
"""The GPU kernels: registered in a CUDA build, equal to the CPU kernels on a GPU.

The comparisons need a GPU that TensorFlow can see and a library built with
TT_CUDA=1; elsewhere they are skipped, with the reason.  The registration
checks run wherever the library was built with CUDA (`make test-cuda-build`
builds it and runs these tests on a machine without a GPU), and the log line
for GPU users without the fused kernel is checked everywhere.
"""

import logging
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import kernels

import tf_transducer as tt
from tf_transducer.ops import _loader
from tf_transducer.ops import rnnt
from tf_transducer.ops import rnnt_joint
from tf_transducer.ops import rnnt_pruned

GPU_OPS = [
    "TfTransducerMutualInformation",
    "TfTransducerRnntLoss",
    "TfTransducerRnntLossGrad",
    "TfTransducerRnntLossPruned",
    "TfTransducerRnntLossPrunedGrad",
    "TfTransducerTdtLoss",
    "TfTransducerRnntJointLoss",
    "TfTransducerRnntJointLossGrad",
]
JOINT_OPS = GPU_OPS[-2:]
HAS_GPU = bool(tf.config.list_physical_devices("GPU"))
gpu_only = pytest.mark.skipif(
    not (HAS_GPU and _loader.built_with_gpu_kernels()),
    reason="needs a GPU visible to TensorFlow and a library built with TT_CUDA=1",
)


def _devices(op_name):
    _loader.op_library()
    registered = kernels.get_registered_kernels_for_op(op_name).kernel
    return sorted(
        {
            (k.device_type, k.constraint[0].allowed_values.list.type[0])
            for k in registered
        }
    )


@pytest.mark.skipif(
    os.environ.get("TT_EXPECT_GPU_KERNELS") != "1",
    reason="checks a CUDA build: run by `make test-cuda-build`",
)
def test_cuda_build_registers_every_op_for_the_gpu():
    assert _loader.built_with_gpu_kernels()
    for name in GPU_OPS:
        assert ("GPU", tf.float32.as_datatype_enum) in _devices(name), name
        assert ("GPU", tf.float64.as_datatype_enum) in _devices(name), name


@pytest.mark.skipif(
    os.environ.get("TT_EXPECT_GPU_KERNELS") != "1",
    reason="checks a CUDA build: run by `make test-cuda-build`",
)
def test_cuda_build_registers_the_joint_loss_for_every_input_dtype():
    for name in JOINT_OPS:
        want = {
            ("GPU", dtype.as_datatype_enum)
            for dtype in (tf.float16, tf.bfloat16, tf.float32, tf.float64)
        }
        assert want <= set(_devices(name)), name


def test_the_library_says_whether_it_has_gpu_kernels():
    has_gpu_kernels = _loader.built_with_gpu_kernels()
    for name in GPU_OPS:
        assert any(d == "GPU" for d, _ in _devices(name)) == has_gpu_kernels, name
        assert ("CPU", tf.float32.as_datatype_enum) in _devices(name), name


def test_gpu_users_without_the_fused_kernel_are_told_once(monkeypatch, caplog):
    monkeypatch.setattr(_loader, "gpu_visible", lambda: True)
    monkeypatch.setattr(_loader, "built_with_gpu_kernels", lambda path=None: False)
    monkeypatch.setattr(_loader, "_noted_paths", set())
    logits = tf.random.normal([2, 4, 3, 5], seed=1)
    symbols = tf.constant([[1, 2], [3, 1]], tf.int64)

    @tf.function(jit_compile=True)
    def compiled(x):
        return tt.ops.rnnt_loss(x, symbols, termination_symbol=0)

    with caplog.at_level(logging.WARNING, logger="tf_transducer"):
        for _ in range(3):
            tt.ops.rnnt_loss(logits, symbols, termination_symbol=0)
            tt.ops.mutual_information_recursion(
                tf.zeros([1, 2, 3]), tf.zeros([1, 3, 2])
            )
        compiled(logits)
        compiled(logits + 1.0)
    messages = [r.getMessage() for r in caplog.records]
    cpu = [m for m in messages if "run their CPU kernels" in m]
    xla = [m for m in messages if "run their pure-TF path" in m]
    assert len(cpu) == 1 and "TT_CUDA=1" in cpu[0]
    assert len(xla) == 1 and "jit_compile=False" in xla[0]


def test_no_gpu_no_log_line(monkeypatch, caplog):
    monkeypatch.setattr(_loader, "gpu_visible", lambda: False)
    monkeypatch.setattr(_loader, "_noted_paths", set())
    with caplog.at_level(logging.WARNING, logger="tf_transducer"):
        tt.ops.mutual_information_recursion(tf.zeros([1, 2, 3]), tf.zeros([1, 3, 2]))
    assert not [r for r in caplog.records if r.name == "tf_transducer"]


def _on(device, fn, *args):
    with tf.device(device):
        args = [tf.identity(a) for a in args]
        with tf.GradientTape() as tape:
            tape.watch(args[0])
            loss = fn(*args)
        return loss.numpy(), tape.gradient(loss, args[0]).numpy()


def _assert_same_on_gpu(fn, *args, rtol):
    cpu = _on("/CPU:0", fn, *args)
    gpu = _on("/GPU:0", fn, *args)
    for c, g in zip(cpu, gpu, strict=True):
        np.testing.assert_allclose(g, c, rtol=rtol, atol=rtol)


@gpu_only
@pytest.mark.parametrize("dtype,rtol", [(tf.float32, 1e-4), (tf.float64, 1e-10)])
@pytest.mark.parametrize("modified", [False, True])
def test_mutual_information_gpu_equals_cpu(dtype, rtol, modified):
    rng = np.random.default_rng(0)
    B, S, T = 3, 7, 11
    px = rng.normal(size=[B, S, T if modified else T + 1])
    px[0, 1, 2] = -np.inf
    py = rng.normal(size=[B, S + 1, T])
    boundary = tf.constant(
        [[0, 0, S, T], [1, 2, 5, 9], [0, 3, 4, 3 + 4 * modified]], tf.int64
    )

    def loss(px, py):
        return tf.reduce_sum(tt.ops.mutual_information_recursion(px, py, boundary))

    _assert_same_on_gpu(loss, tf.constant(px, dtype), tf.constant(py, dtype), rtol=rtol)


@gpu_only
@pytest.mark.parametrize("dtype,rtol", [(tf.float32, 1e-4), (tf.float64, 1e-10)])
@pytest.mark.parametrize("rnnt_type", ["regular", "modified", "constrained"])
@pytest.mark.parametrize(
    "options", [{}, {"clamp": 0.05, "fastemit_lambda": 0.01, "delay_penalty": 0.1}]
)
def test_rnnt_loss_gpu_equals_cpu(dtype, rtol, rnnt_type, options):
    rng = np.random.default_rng(1)
    B, T, S, C = 3, 9, 4, 13
    logits = tf.constant(rng.normal(size=[B, T, S + 1, C]), dtype)
    symbols = tf.constant(rng.integers(1, C, size=[B, S]), tf.int64)
    logit_lengths = tf.constant([T, T - 2, S + 1], tf.int64)
    label_lengths = tf.constant([S, S - 1, 1], tf.int64)

    def loss(x):
        return rnnt.rnnt_loss(
            x,
            symbols,
            termination_symbol=3,
            rnnt_type=rnnt_type,
            logit_lengths=logit_lengths,
            label_lengths=label_lengths,
            reduction="sum",
            **options,
        )

    _assert_same_on_gpu(loss, logits, rtol=rtol)


@gpu_only
@pytest.mark.parametrize("dtype,rtol", [(tf.float32, 1e-4), (tf.float64, 1e-10)])
def test_pruned_rnnt_loss_gpu_equals_cpu(dtype, rtol):
    rng = np.random.default_rng(2)
    B, T, S, C, R = 2, 10, 6, 11, 3
    symbols = tf.constant(rng.integers(1, C, size=[B, S]), tf.int64)
    starts = np.minimum(np.arange(T) // 2, S - (R - 1))
    ranges = tf.constant(
        np.broadcast_to(starts[None, :, None] + np.arange(R), [B, T, R]), tf.int64
    )
    logits = tf.constant(rng.normal(size=[B, T, R, C]), dtype)

    def loss(x):
        return rnnt_pruned.rnnt_loss_pruned(
            x, symbols, ranges, termination_symbol=0, reduction="sum"
        )

    _assert_same_on_gpu(loss, logits, rtol=rtol)


@gpu_only
@pytest.mark.parametrize("dtype,rtol", [(tf.float32, 1e-4), (tf.float64, 1e-10)])
@pytest.mark.parametrize(
    "options", [{}, {"sigma": 0.05, "clamp": 0.05, "fastemit_lambda": 0.01}]
)
def test_tdt_loss_gpu_equals_cpu(dtype, rtol, options):
    rng = np.random.default_rng(4)
    B, T, S, C, durations = 3, 9, 4, 13, [0, 1, 2, 4]
    durs = tf.constant(rng.normal(size=[B, T, S + 1, len(durations)]), dtype)
    symbols = tf.constant(rng.integers(1, C, size=[B, S]), tf.int64)

    def loss(tokens, durs):
        return tt.ops.tdt_loss(
            tokens, durs, symbols, 3, durations, reduction="sum",
            logit_lengths=tf.constant([T, T - 2, 1], tf.int64),
            label_lengths=tf.constant([S, S - 1, 2], tf.int64), **options,
        )  # fmt: skip

    tokens = tf.constant(rng.normal(size=[B, T, S + 1, C]), dtype)
    cpu = _on_all("/CPU:0", loss, tokens, durs)
    gpu = _on_all("/GPU:0", loss, tokens, durs)
    for c, g in zip(cpu, gpu, strict=True):
        np.testing.assert_allclose(g, c, rtol=rtol, atol=rtol)


@gpu_only
def test_gpu_kernels_reject_bad_input_before_launch():
    with tf.device("/GPU:0"):
        px = tf.constant([[[0.0, np.nan, 0.0]]])
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"px\[0, 0, 1\]"):
            tt.ops.mutual_information_recursion(px, tf.zeros([1, 2, 2]))
        logits = tf.zeros([1, 3, 3, 4])
        with pytest.raises(tf.errors.InvalidArgumentError, match="symbols"):
            rnnt.rnnt_loss(
                logits, tf.constant([[1, 9]], tf.int64), termination_symbol=0
            )


def _on_all(device, fn, *args):
    """fn's value and its gradients with respect to every argument."""
    with tf.device(device):
        args = [tf.identity(a) for a in args]
        with tf.GradientTape() as tape:
            tape.watch(args)
            loss = fn(*args)
        return [loss, *tape.gradient(loss, args)]


def _joint_problem(dtype, B=3, T=9, S=4, J=7, C=13, seed=3):
    rng = np.random.default_rng(seed)
    inputs = [
        tf.cast(rng.normal(size=shape), dtype)
        for shape in ([B, T, J], [B, S + 1, J], [J, C], [C])
    ]
    symbols = tf.constant(rng.integers(1, C, size=[B, S]), tf.int64)
    return inputs, symbols


@gpu_only
@pytest.mark.parametrize("dtype,rtol", [(tf.float32, 1e-4), (tf.float64, 1e-10)])
@pytest.mark.parametrize("rnnt_type", ["regular", "modified", "constrained"])
@pytest.mark.parametrize("activation", ["tanh", "relu"])
@pytest.mark.parametrize(
    "options", [{}, {"clamp": 0.05, "fastemit_lambda": 0.01, "delay_penalty": 0.1}]
)
def test_joint_loss_gpu_equals_cpu(dtype, rtol, rnnt_type, activation, options):
    inputs, symbols = _joint_problem(dtype)
    T, S = inputs[0].shape[1], symbols.shape[1]

    def loss(*args):
        return rnnt_joint.rnnt_loss_joint(
            *args,
            symbols,
            termination_symbol=3,
            activation=activation,
            rnnt_type=rnnt_type,
            logit_lengths=tf.constant([T, T - 2, S + 1], tf.int64),
            label_lengths=tf.constant([S, S - 1, 1], tf.int64),
            reduction="sum",
            **options,
        )

    cpu = _on_all("/CPU:0", loss, *inputs)
    gpu = _on_all("/GPU:0", loss, *inputs)
    for name, c, g in zip(["loss", "de", "dp", "dW", "dc"], cpu, gpu, strict=True):
        np.testing.assert_allclose(g, c, rtol=rtol, atol=rtol, err_msg=name)


def _assert_near(got, want, rtol, names=("loss", "de", "dp", "dW", "dc")):
    """Each tensor within rtol of its largest magnitude."""
    for name, g, w in zip(names, got, want, strict=True):
        g, w = tf.cast(g, tf.float64).numpy(), tf.cast(w, tf.float64).numpy()
        np.testing.assert_allclose(
            g, w, rtol=rtol, atol=rtol * max(1.0, np.abs(w).max()), err_msg=name
        )


@gpu_only
@pytest.mark.parametrize("dtype,rtol", [(tf.float16, 5e-3), (tf.bfloat16, 3e-2)])
def test_joint_loss_16_bit_inputs_on_the_gpu(dtype, rtol):
    # On the GPU the products run on tensor cores with the hidden and the
    # logits' gradient rounded to the inputs' type; the CPU multiplies them
    # exactly: they agree to about the 16-bit type's precision.
    inputs, symbols = _joint_problem(dtype, seed=4)

    def loss(*args):
        return rnnt_joint.rnnt_loss_joint(
            *args, symbols, termination_symbol=0, reduction="sum"
        )

    cpu = _on_all("/CPU:0", loss, *inputs)
    gpu = _on_all("/GPU:0", loss, *inputs)
    for name, g in zip(["loss", "de", "dp", "dW", "dc"], gpu, strict=True):
        assert g.dtype == (tf.float32 if name == "loss" else dtype), name
    _assert_near(gpu, cpu, rtol)


@gpu_only
def test_joint_loss_tf32_on_the_gpu_is_near_exact_and_off_by_default():
    inputs, symbols = _joint_problem(tf.float32, B=4, T=30, S=8, J=96, C=200, seed=5)

    def loss(allow_tf32):
        def fn(*args):
            return rnnt_joint.rnnt_loss_joint(
                *args, symbols, termination_symbol=0, reduction="sum",
                allow_tf32=allow_tf32,
            )  # fmt: skip

        return fn

    cpu = _on_all("/CPU:0", loss(False), *inputs)
    exact = _on_all("/GPU:0", loss(False), *inputs)
    tf32 = _on_all("/GPU:0", loss(True), *inputs)
    _assert_near(exact, cpu, 1e-4)
    _assert_near(tf32, cpu, 5e-3)
    # TF32 keeps 10 mantissa bits: with J = 96 products per logit it cannot
    # equal the exact products everywhere.
    assert any(
        not np.array_equal(a.numpy(), b.numpy())
        for a, b in zip(tf32, exact, strict=True)
    )


@gpu_only
def test_joint_loss_gpu_rejects_bad_input_before_launch():
    inputs, _ = _joint_problem(tf.float32)
    with tf.device("/GPU:0"):
        with pytest.raises(tf.errors.InvalidArgumentError, match="symbols"):
            rnnt_joint.rnnt_loss_joint(
                *inputs, tf.constant([[1, 99, 2, 3]] * 3, tf.int64), 0
            )
        bad = tf.tensor_scatter_nd_update(
            inputs[0], [[1, 0, 0]], tf.constant([np.nan], tf.float32)
        )
        with pytest.raises(tf.errors.InvalidArgumentError, match="sequence 1"):
            rnnt_joint.rnnt_loss_joint(
                bad, *inputs[1:], tf.constant([[1, 2, 3, 4]] * 3, tf.int64), 0
            )


@gpu_only
@pytest.mark.parametrize("rnnt_type", ["regular", "modified", "constrained"])
def test_empty_transcripts_on_the_gpu_equal_the_cpu(rnnt_type):
    # symbols [B, 0]: no px rows at all (no finishing kernel to launch).
    rng = np.random.default_rng(4)
    B, T, C, J = 3, 7, 9, 5
    symbols = tf.zeros([B, 0], tf.int64)
    lengths = dict(
        logit_lengths=tf.constant([T, 4, 1], tf.int64),
        label_lengths=tf.zeros([B], tf.int64),
    )
    logits = tf.constant(rng.normal(size=[B, T, 1, C]), tf.float64)

    def loss(x):
        return rnnt.rnnt_loss(
            x, symbols, 2, rnnt_type=rnnt_type, reduction="sum", **lengths
        )

    _assert_same_on_gpu(loss, logits, rtol=1e-10)
    inputs = [
        tf.constant(rng.normal(size=shape), tf.float64)
        for shape in ([B, T, J], [B, 1, J], [J, C], [C])
    ]

    def joint_loss(*args):
        return rnnt_joint.rnnt_loss_joint(
            *args, symbols, 2, rnnt_type=rnnt_type, reduction="sum", **lengths
        )

    cpu = _on_all("/CPU:0", joint_loss, *inputs)
    gpu = _on_all("/GPU:0", joint_loss, *inputs)
    for name, c, g in zip(["loss", "de", "dp", "dW", "dc"], cpu, gpu, strict=True):
        np.testing.assert_allclose(g, c, rtol=1e-10, atol=1e-12, err_msg=name)
