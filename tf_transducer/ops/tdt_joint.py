# SPDX-License-Identifier: Apache-2.0
"""The TDT loss fused with its joint network: logits that never exist.

A TDT joint forms, for every frame t and symbol position u,

    h[b, t, u]               = act(encoder[b, t] + predictor[b, u])   [J]
    token_logits[b, t, u]    = h @ weight + bias                      [C]
    duration_logits[b, t, u] = h @ duration_weight + duration_bias    [K]

`tdt_loss_joint` takes the joint's inputs: the token head runs through
`rnnt_loss_joint`'s tiles (`TfTransducerRnntJointLogProbs`: each tile's
log-softmax normaliser and its label and blank log-probs kept, the logits
dropped; formed again in the backward pass by its gradient op), the
duration head's logits ([B, T, S + 1, K], small) are formed a chunk of
frames at a time (`joint_head_logits`), and the lattice is `tdt_loss`'s
(`TfTransducerTdtLattice`). Neither the token logits [B, T, S + 1, C] nor the
hidden [B, T, S + 1, J] is ever stored. Under XLA the token head runs in
plain TensorFlow a chunk at a time, as `rnnt_loss_joint`'s.
"""

from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import after
from tf_transducer._checks import finite_or_neg_inf
from tf_transducer._checks import float_tensor
from tf_transducer._checks import in_xla_context
from tf_transducer.ops import _loader
from tf_transducer.ops._validation import _dim
from tf_transducer.ops._validation import default_boundary
from tf_transducer.ops.rnnt_joint import check_joint_inputs
from tf_transducer.ops.rnnt_joint import rnnt_loss_joint
from tf_transducer.ops.rnnt_joint_tf import _Joint
from tf_transducer.ops.rnnt_joint_tf import chunk_frames
from tf_transducer.ops.rnnt_joint_tf import joint_head_logits
from tf_transducer.ops.rnnt_lattice import _reduce
from tf_transducer.ops.rnnt_lattice import _resolve_boundary
from tf_transducer.ops.tdt import DEFAULT_DURATIONS
from tf_transducer.ops.tdt import _zero_beyond
from tf_transducer.ops.tdt import check_options
from tf_transducer.ops.tdt_lattice import tdt_lattice_scores


def _check_duration_head(duration_weight, duration_bias, weight, num_durations):
    """The duration head [J, K] and [K], checked against the token head."""
    duration_weight = float_tensor(duration_weight, "duration_weight", 2, "[J, K]")
    duration_bias = float_tensor(duration_bias, "duration_bias", 1, "[K]")
    for name, x in (("duration_weight", duration_weight),
                    ("duration_bias", duration_bias)):  # fmt: skip
        if x.dtype != weight.dtype:
            raise ValueError(
                f"{name} must have the dtype of weight ({weight.dtype.name}), "
                f"got {x.dtype.name}"
            )
        if x.shape[-1] is not None and x.shape[-1] != num_durations:
            raise ValueError(
                f"{name} must have K = len(durations) = {num_durations} columns, "
                f"got shape {x.shape}"
            )
    if None not in (duration_weight.shape[0], weight.shape[0]):
        if duration_weight.shape[0] != weight.shape[0]:
            raise ValueError(
                f"duration_weight {duration_weight.shape} and weight "
                f"{weight.shape} must agree in J"
            )
    return duration_weight, duration_bias


def tdt_loss_joint(
    encoder: TensorLike, predictor: TensorLike, weight: TensorLike, bias: TensorLike,
    duration_weight: TensorLike, duration_bias: TensorLike, symbols: TensorLike,
    blank: int, durations: Sequence[int] = DEFAULT_DURATIONS,
    activation: str = "tanh", *, sigma: float = 0.0, omega: float = 0.0,
    reduction: str = "mean", logit_lengths: TensorLike | None = None,
    label_lengths: TensorLike | None = None, clamp: float = -1.0,
    fastemit_lambda: float = 0.0, allow_tf32: bool = False,
) -> tf.Tensor:  # fmt: skip
    """The TDT loss of a joint network's inputs, without its logits.

    The same loss as `tdt_loss(token_logits, duration_logits, ...)` of the
    joint in the module docstring, and the gradients of all six float
    inputs, with memory that does not grow with the vocabulary. float16 and
    bfloat16 inputs are computed in float32 (the loss is float32, the
    gradients of the inputs' dtype); their matrix products as
    `rnnt_loss_joint`'s.

    Args:
      encoder: float [B, T, J], the encoder's projection into the joint.
      predictor: float [B, S + 1, J], the prediction network's projection.
      weight: float [J, C], the token head.
      bias: float [C], its bias.
      duration_weight: float [J, K], the duration head, K = len(durations).
      duration_bias: float [K], its bias.
      symbols: int [B, S], values in [0, C).
      blank: int in [0, C), the blank.
      durations: as `tdt_loss`.
      activation: "tanh", "relu" or "identity", applied to the sum.
      sigma: float >= 0, subtracted from every token log-prob.
      omega: float in [0, 1], as `tdt_loss` (mixing in `rnnt_loss_joint`).
      reduction: "none" ([B] losses), "mean" or "sum".
      logit_lengths: optional int [B] frames, in [1, T]; default T.
      label_lengths: optional int [B] symbols, in [0, S]; default S.
      clamp: if > 0, each gradient element of each utterance's loss with
        respect to the token and duration logits is clamped.
      fastemit_lambda: float >= 0, FastEmit, as `tdt_loss`.
      allow_tf32: as `rnnt_loss_joint`.

    Returns:
      The loss: [B] with reduction "none", else a scalar.
    """
    durations, sigma, omega, clamp, fastemit_lambda = check_options(
        durations, reduction, sigma, omega, clamp, fastemit_lambda
    )
    if not isinstance(allow_tf32, bool):
        raise ValueError(f"allow_tf32 must be True or False, got {allow_tf32!r}")
    with tf.name_scope("tdt_loss_joint"):
        # The regular lattice's px holds every node's label log-prob (its
        # last column is the regular lattice's own -inf): no T >= S needed.
        encoder, predictor, weight, bias, symbols = check_joint_inputs(
            encoder, predictor, weight, bias, symbols, blank, "regular", activation
        )
        duration_weight, duration_bias = _check_duration_head(
            duration_weight, duration_bias, weight, len(durations)
        )
        num_frames, num_symbols = _dim(encoder, 1), _dim(symbols, 1)
        boundary = _resolve_boundary(
            None, logit_lengths, label_lengths, num_frames, num_symbols
        )
        if boundary is None:
            shape = tf.shape(encoder, out_type=tf.int64)
            boundary = default_boundary(
                shape[0], tf.shape(symbols, out_type=tf.int64)[1], shape[1]
            )
        frames, labels = boundary[:, 3], boundary[:, 2]
        # Padding frames and positions become 0, so that nothing there (not
        # even a NaN) reaches the loss or a gradient; a NaN or inf input
        # elsewhere is named here (the ops downstream see only log-probs).
        encoder = _zero_beyond(encoder, frames)
        predictor = _zero_beyond(predictor, labels + 1)
        named = dict(
            encoder=encoder,
            predictor=predictor,
            weight=weight,
            bias=bias,
            duration_weight=duration_weight,
            duration_bias=duration_bias,
        )
        with after(*(finite_or_neg_inf(x, name, neg_inf=False)
                     for name, x in named.items())):  # fmt: skip
            encoder, predictor = tf.identity(encoder), tf.identity(predictor)
        # 16-bit inputs: the duration head in float32 too (its logits are
        # small), as the token head's maths.
        wide = tf.float64 if encoder.dtype == tf.float64 else tf.float32
        duration_logits = joint_head_logits(
            tf.cast(encoder, wide), tf.cast(predictor, wide),
            tf.cast(duration_weight, wide), tf.cast(duration_bias, wide), activation,
        )  # fmt: skip
        lattice = dict(durations=durations, logit_lengths=frames,
                       label_lengths=labels, sigma=sigma, clamp=clamp,
                       fastemit_lambda=fastemit_lambda)  # fmt: skip
        joint = dict(symbols=symbols, boundary=boundary, blank=blank,
                     activation=activation, clamp=clamp,
                     fastemit_lambda=fastemit_lambda)  # fmt: skip
        xla = in_xla_context()
        _loader.note_cpu_or_xla_path(xla)
        if xla:
            scores = _scores_tf(encoder, predictor, weight, bias, duration_logits,
                                joint, lattice)  # fmt: skip
        else:
            scores = _scores_op(encoder, predictor, weight, bias, duration_logits,
                                joint, lattice, allow_tf32)  # fmt: skip
        if omega > 0:
            rnnt = -rnnt_loss_joint(
                encoder, predictor, weight, bias, symbols, blank, activation,
                reduction="none", logit_lengths=frames, label_lengths=labels,
                clamp=clamp, fastemit_lambda=fastemit_lambda, allow_tf32=allow_tf32,
            )  # fmt: skip
            rnnt -= sigma * tf.cast(frames + labels, rnnt.dtype)
            scores = (1 - omega) * scores + omega * tf.cast(rnnt, scores.dtype)
        return _reduce(scores, reduction)


def _scores_op(encoder, predictor, weight, bias, duration_logits, joint, lattice,
               allow_tf32):  # fmt: skip
    """log P [B] by the C++ ops: the joint's log-probs, then the lattice."""
    library = _loader.op_library()
    compute_dtype = tf.float64 if encoder.dtype == tf.float64 else tf.float32
    options = dict(termination_symbol=joint["blank"], rnnt_type="regular",
                   activation=joint["activation"], allow_tf32=allow_tf32)  # fmt: skip

    @tf.custom_gradient
    def scores_of(encoder, predictor, weight, bias, duration_logits):
        px, py, norms = library.tf_transducer_rnnt_joint_log_probs(
            encoder=encoder, predictor=predictor, weight=weight, bias=bias,
            symbols=joint["symbols"], boundary=joint["boundary"],
            delay_penalty=tf.constant(0.0, compute_dtype), **options,
        )  # fmt: skip
        num_frames = tf.shape(py)[2]
        scores, (px_grad, py_grad, duration_grad) = tdt_lattice_scores(
            px[:, :, :num_frames], py, tf.cast(duration_logits, compute_dtype),
            return_grad=True, **lattice,
        )  # fmt: skip

        def backward(d_scores):
            d_joint = library.tf_transducer_rnnt_joint_loss_grad(
                encoder=encoder, predictor=predictor, weight=weight, bias=bias,
                symbols=joint["symbols"],
                px_grad=tf.pad(px_grad, [[0, 0], [0, 0], [0, 1]]),
                py_grad=py_grad, normalizers=norms, scale=d_scores,
                clamp=joint["clamp"], fastemit_lambda=joint["fastemit_lambda"],
                **options,
            )  # fmt: skip
            scale = d_scores[:, tf.newaxis, tf.newaxis, tf.newaxis]
            d_durations = tf.cast(duration_grad * scale, duration_logits.dtype)
            return [*d_joint, d_durations]

        return scores, backward

    return scores_of(encoder, predictor, weight, bias, duration_logits)


def _scores_tf(encoder, predictor, weight, bias, duration_logits, joint, lattice):
    """log P [B] in plain TensorFlow (XLA).

    `rnnt_loss_joint`'s chunks for the token head, then the lattice's twin.
    """
    chunk = _Joint(
        symbols=joint["symbols"],
        boundary=joint["boundary"],
        frames=chunk_frames(None, encoder, predictor, weight),
        blank=joint["blank"],
        rnnt_type="regular",
        activation=joint["activation"],
        delay_penalty=0.0,
        clamp=float(np.float32(joint["clamp"])),
        emit=1.0 + float(np.float32(joint["fastemit_lambda"])),
    )

    @tf.custom_gradient
    def scores_of(encoder, predictor, weight, bias, duration_logits) -> Any:
        inputs = (encoder, predictor, weight, bias)
        dtype = chunk.dtype(encoder.dtype)
        wide = tuple(tf.cast(x, dtype) for x in inputs)
        norm, px, py = chunk.log_probs(*wide)
        num_frames = tf.shape(py)[2]
        scores, (px_grad, py_grad, duration_grad) = tdt_lattice_scores(
            px[:, :, :num_frames], py, tf.cast(duration_logits, dtype),
            return_grad=True, **lattice,
        )  # fmt: skip

        def backward(d_scores):
            saved = (norm, tf.pad(px_grad, [[0, 0], [0, 0], [0, 1]]), py_grad)
            grads = chunk.backward(wide, saved, d_scores)
            scale = tf.cast(d_scores, dtype)[:, tf.newaxis, tf.newaxis, tf.newaxis]
            d_durations = tf.cast(duration_grad * scale, duration_logits.dtype)
            grads = [tf.cast(g, x.dtype) for g, x in zip(grads, inputs, strict=True)]
            return [*grads, d_durations]

        return scores, backward

    return scores_of(encoder, predictor, weight, bias, duration_logits)
