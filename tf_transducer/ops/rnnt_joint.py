# SPDX-License-Identifier: Apache-2.0
"""The RNN-T loss fused with its joint network: logits that never exist.

A transducer's joint network forms, for every frame t and symbol position s,

    logits[b, t, s] = act(encoder[b, t] + predictor[b, s]) @ weight + bias

and at the scale transducers train at ([B, T, S + 1, C] with C in the
thousands) these logits, the hidden activations [B, T, S + 1, J] and their
gradients decide the batch size.  `rnnt_loss_joint` takes the joint's inputs
instead of its output: one C++ op forms the logits a tile of cells at a
time, keeps of each tile only its log-softmax normalisers and its symbol and
blank log-probs, runs the recursion, and in the backward pass forms each
tile again to accumulate the gradients of all four float inputs.  Memory
beyond the inputs and outputs: O(B T S) values plus a tile per thread.

Under XLA (`jit_compile=True`), where custom ops cannot run, the same loss
is computed in plain TensorFlow a chunk of frames at a time, forming each
chunk again in the backward pass (`tf_transducer.ops.rnnt_joint_tf`).

The lattices, rnnt_type, delay_penalty, clamp and FastEmit are as in
`tf_transducer.ops.rnnt.rnnt_loss`.
"""

from typing import Any

import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import after
from tf_transducer._checks import clamp_value
from tf_transducer._checks import float_tensor
from tf_transducer._checks import real_number
from tf_transducer._checks import require
from tf_transducer.ops import _loader
from tf_transducer.ops._validation import _check_boundary
from tf_transducer.ops._validation import _check_frames
from tf_transducer.ops._validation import _check_options
from tf_transducer.ops._validation import _check_symbols
from tf_transducer.ops._validation import _check_termination
from tf_transducer.ops._validation import _dim
from tf_transducer.ops._validation import default_boundary
from tf_transducer.ops.mutual_information import in_xla_context
from tf_transducer.ops.rnnt_joint_tf import joint_scores_tf
from tf_transducer.ops.rnnt_lattice import _reduce
from tf_transducer.ops.rnnt_lattice import _resolve_boundary

ACTIVATIONS = ("tanh", "relu", "identity")


def check_joint_inputs(
    encoder: TensorLike, predictor: TensorLike, weight: TensorLike, bias: TensorLike,
    symbols: TensorLike, termination_symbol: int, rnnt_type: str, activation: str,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:  # fmt: skip
    """The joint loss's inputs as tensors, checked; errors name the argument.

    Returns (encoder, predictor, weight, bias, symbols int64).
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    encoder = float_tensor(encoder, "encoder", 3, "[B, T, J]")
    predictor = float_tensor(predictor, "predictor", 3, "[B, S + 1, J]")
    weight = float_tensor(weight, "weight", 2, "[J, C]")
    bias = float_tensor(bias, "bias", 1, "[C]")
    for name, x in (("predictor", predictor), ("weight", weight), ("bias", bias)):
        if x.dtype != encoder.dtype:
            raise ValueError(
                f"{name} must have the dtype of encoder ({encoder.dtype.name}), "
                f"got {x.dtype.name}"
            )
    checks = []
    agree = (  # (what, (name, tensor, axis), (name, tensor, axis))
        ("B", ("encoder", encoder, 0), ("predictor", predictor, 0)),
        ("J", ("encoder", encoder, 2), ("predictor", predictor, 2)),
        ("J", ("encoder", encoder, 2), ("weight", weight, 0)),
        ("C", ("weight", weight, 1), ("bias", bias, 0)),
    )
    for what, (name_a, a, i), (name_b, b, k) in agree:
        if a.shape[i] is not None and b.shape[k] is not None:
            if a.shape[i] != b.shape[k]:
                raise ValueError(
                    f"{name_a} {a.shape} and {name_b} {b.shape} must agree in {what}"
                )
        else:
            checks.append(
                require(
                    tf.equal(tf.shape(a)[i], tf.shape(b)[k]),
                    f"{name_a} and {name_b} must agree in {what}, got {name_a} "
                    f"{{}} and {name_b} {{}}",
                    tf.shape(a),
                    tf.shape(b),
                )
            )
    num_classes = _dim(weight, 1)
    _check_termination(termination_symbol, num_classes)
    with after(*checks):
        symbols = _check_symbols(
            symbols, _dim(encoder, 0), _dim(predictor, 1) - 1, num_classes
        )
    _check_frames(_dim(encoder, 1), _dim(symbols, 1), rnnt_type)
    return encoder, predictor, weight, bias, symbols


@tf.RegisterGradient("TfTransducerRnntJointLoss")
def _rnnt_joint_loss_grad(op, d_scores, *unused_d_statistics):
    """Each tile formed again: the forward op kept only what the tiles need."""
    _, px_grad, py_grad, normalizers = op.outputs
    names = ("termination_symbol", "rnnt_type", "activation", "clamp")
    names += ("fastemit_lambda", "allow_tf32")
    attrs = {name: op.get_attr(name) for name in names}
    grads = _loader.op_library().tf_transducer_rnnt_joint_loss_grad(
        encoder=op.inputs[0],
        predictor=op.inputs[1],
        weight=op.inputs[2],
        bias=op.inputs[3],
        symbols=op.inputs[4],
        px_grad=px_grad,
        py_grad=py_grad,
        normalizers=normalizers,
        scale=d_scores,
        **attrs,
    )
    return list(grads) + [None, None, None]


def rnnt_loss_joint(
    encoder: TensorLike, predictor: TensorLike, weight: TensorLike, bias: TensorLike,
    symbols: TensorLike, termination_symbol: int, activation: str = "tanh",
    boundary: TensorLike | None = None, rnnt_type: str = "regular",
    delay_penalty: float = 0.0, reduction: str = "mean",
    logit_lengths: TensorLike | None = None, label_lengths: TensorLike | None = None,
    clamp: float = -1.0, fastemit_lambda: float = 0.0, allow_tf32: bool = False,
) -> tf.Tensor:  # fmt: skip
    """The RNN-T loss of a joint network's inputs, without its logits.

    The same loss as `rnnt_loss(logits, ...)` with
    logits[b, t, s] = activation(encoder[b, t] + predictor[b, s]) @ weight +
    bias, and the gradients of encoder, predictor, weight and bias, but
    neither the logits [B, T, S + 1, C] nor the hidden [B, T, S + 1, J] is
    ever stored (see the module docstring). float16 and bfloat16 inputs are
    read as such and computed in float32 (the loss is float32, the gradients
    of the inputs' dtype). On a GPU the matrix products of float16 and
    bfloat16 inputs run on tensor cores with their operands (the hidden
    activations and the logits' gradient too) in the inputs' type and
    float32 accumulation, as 16-bit matrix products do everywhere; float32
    products run exactly unless `allow_tf32`. On a CPU with AVX512_BF16 the
    products of bfloat16 inputs do the same (`cpu_gemm_paths`).

    Args:
      encoder: float [B, T, J], the encoder's projection into the joint.
      predictor: float [B, S + 1, J], the prediction network's projection.
      weight: float [J, C], the joint's output layer.
      bias: float [C], the output layer's bias.
      symbols: int [B, S], values in [0, C); S may be 0 (every transcript
        empty: each frame emits a blank).
      termination_symbol: int in [0, C), the blank.
      activation: "tanh", "relu" or "identity", applied to the sum.
      boundary: optional int [B, 4] rows (s_begin, t_begin, s_end, t_end).
      rnnt_type: "regular", "modified" or "constrained".
      delay_penalty: float >= 0, as `rnnt_loss`.
      reduction: "none" ([B] losses), "mean" or "sum".
      logit_lengths: optional int [B] frames, with label_lengths instead of
        boundary.
      label_lengths: optional int [B] symbols, with logit_lengths.
      clamp: as `rnnt_loss`: > 0 clamps each element of the gradient of
        each utterance's loss with respect to the logits.
      fastemit_lambda: float >= 0, FastEmit regularisation.
      allow_tf32: on a GPU, run float32 inputs' matrix products on tensor
        cores in TF32 (10 mantissa bits, float32 accumulation), as torch's
        `allow_tf32`; off (the default), they are exact float32. The CPU
        kernels multiply float32 and float64 exactly; under XLA the products
        follow TensorFlow's own TF32 setting
        (`tf.config.experimental.enable_tensor_float_32_execution`).

    Returns:
      The loss: [B] with reduction "none", else a scalar.
    """
    delay_penalty = _check_options(rnnt_type, reduction, delay_penalty)
    clamp = clamp_value(clamp)
    fastemit_lambda = real_number("fastemit_lambda", fastemit_lambda, minimum=0.0)
    if not isinstance(allow_tf32, bool):
        raise ValueError(f"allow_tf32 must be True or False, got {allow_tf32!r}")
    with tf.name_scope("rnnt_loss_joint"):
        encoder, predictor, weight, bias, symbols = check_joint_inputs(
            encoder,
            predictor,
            weight,
            bias,
            symbols,
            termination_symbol,
            rnnt_type,
            activation,
        )
        boundary = _resolve_boundary(
            boundary,
            logit_lengths,
            label_lengths,
            _dim(encoder, 1),
            _dim(predictor, 1) - 1,
        )
        options: dict[str, Any] = dict(
            termination_symbol=termination_symbol,
            rnnt_type=rnnt_type,
            activation=activation,
            clamp=float(clamp),
            fastemit_lambda=float(fastemit_lambda),
        )
        xla = in_xla_context()
        _loader.note_cpu_or_xla_path(xla)
        if xla:
            scores = joint_scores_tf(
                encoder, predictor, weight, bias, symbols, boundary,
                delay_penalty=delay_penalty, **options,
            )  # fmt: skip
            return _reduce(scores, reduction)
        if boundary is None:
            shape = tf.shape(encoder, out_type=tf.int64)
            boundary = default_boundary(
                shape[0], tf.shape(symbols, out_type=tf.int64)[1], shape[1]
            )
        else:
            boundary = _check_boundary(boundary, encoder.shape[0])
        compute_dtype = tf.float64 if encoder.dtype == tf.float64 else tf.float32
        scores, *_ = _loader.op_library().tf_transducer_rnnt_joint_loss(
            encoder=encoder,
            predictor=predictor,
            weight=weight,
            bias=bias,
            symbols=symbols,
            boundary=boundary,
            delay_penalty=tf.constant(delay_penalty, compute_dtype),
            allow_tf32=allow_tf32,
            **options,
        )
        return _reduce(scores, reduction)
