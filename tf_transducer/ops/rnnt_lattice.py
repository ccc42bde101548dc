# SPDX-License-Identifier: Apache-2.0
"""What the RNN-T losses on the MI recursion share, after their log-probs.

Boundaries from lengths, the lattice's px finished for rnnt_type and the
boundary, the delay penalty, the recursion and the reduction. The lattices
are described in `tf_transducer.ops.rnnt`.
"""

import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import after
from tf_transducer._checks import first_bad
from tf_transducer._checks import in_xla_context
from tf_transducer._checks import integer_tensor
from tf_transducer._checks import require
from tf_transducer.ops._validation import _check_boundary
from tf_transducer.ops._validation import _check_boundary_values
from tf_transducer.ops._validation import _dim
from tf_transducer.ops.mutual_information import mutual_information_recursion

_NEG_INF = float("-inf")


def boundary_from_lengths(
    logit_lengths: TensorLike,
    label_lengths: TensorLike,
    num_frames: TensorLike | None = None,
    num_symbols: TensorLike | None = None,
) -> tf.Tensor:
    """int64 [B, 4] rows (0, 0, label_length, logit_length).

    Args:
      logit_lengths: int [B], frames of each utterance.
      label_lengths: int [B], symbols of each utterance.
      num_frames: the padded T, to check logit_lengths against
        (InvalidArgumentError when a length is negative or larger).
      num_symbols: the padded S, to check label_lengths against, likewise.

    Raises:
      ValueError: lengths that are not integer vectors, or of different sizes.
    """
    with tf.name_scope("boundary_from_lengths"):
        frames = integer_tensor(logit_lengths, "logit_lengths", 1, "[B]")
        labels = integer_tensor(label_lengths, "label_lengths", 1, "[B]")
        if None not in (frames.shape[0], labels.shape[0]) and (
            frames.shape[0] != labels.shape[0]
        ):
            raise ValueError(
                f"logit_lengths {frames.shape} and label_lengths {labels.shape} "
                "must have the same size B"
            )
        checks = []
        if not in_xla_context():
            checks.append(
                require(
                    tf.equal(tf.size(frames), tf.size(labels)),
                    "logit_lengths and label_lengths must have the same size B, "
                    "got {} and {}",
                    tf.size(frames),
                    tf.size(labels),
                )
            )
            for name, x, limit in (
                ("logit_lengths", frames, num_frames),
                ("label_lengths", labels, num_symbols),
            ):
                bad = x < 0
                if limit is not None:
                    bad |= x > tf.cast(limit, tf.int64)
                value, index = first_bad(bad, x)
                what = "[0, T = {}]" if name == "logit_lengths" else "[0, S = {}]"
                checks.append(
                    require(
                        ~tf.reduce_any(bad),
                        f"{name} must lie in {what}; got {{}} at index {{}}",
                        -1 if limit is None else limit,
                        value,
                        index,
                    )
                )
        # In a graph, whatever uses the boundary runs after the checks.
        with tf.control_dependencies([c for c in checks if c is not None]):
            zeros = tf.zeros_like(frames)
            return tf.stack([zeros, zeros, labels, frames], axis=1)


def _resolve_boundary(
    boundary: TensorLike | None,
    logit_lengths: TensorLike | None,
    label_lengths: TensorLike | None,
    num_frames: TensorLike,
    num_symbols: TensorLike,
) -> tf.Tensor | None:
    if logit_lengths is None and label_lengths is None:
        return boundary if boundary is None else _check_boundary(boundary)
    if boundary is not None:
        raise ValueError(
            "give either boundary or logit_lengths / label_lengths, not both"
        )
    if logit_lengths is None or label_lengths is None:
        raise ValueError("logit_lengths and label_lengths must be given together")
    return boundary_from_lengths(logit_lengths, label_lengths, num_frames, num_symbols)


def _fix_for_boundary(px, boundary):
    """regular px: -inf at t = t_end of each sequence (no symbol after it)."""
    if boundary is None:
        return px
    t = tf.range(tf.shape(px)[2], dtype=tf.int64)
    t_end = tf.cast(boundary, tf.int64)[:, 3, tf.newaxis, tf.newaxis]
    return tf.where(t[tf.newaxis, tf.newaxis] == t_end, tf.cast(_NEG_INF, px.dtype), px)


def _finish_logprobs(px, py, boundary, rnnt_type):
    if boundary is not None:
        boundary = _check_boundary(boundary, _dim(py, 0))
        shape = tf.shape(py, out_type=tf.int64)
        with after(_check_boundary_values(boundary, shape[1] - 1, shape[2])):
            boundary = tf.identity(boundary)
    if rnnt_type == "regular":
        return _fix_for_boundary(px, boundary), py
    if rnnt_type == "constrained":
        return px + py[:, 1:, :], py
    return px, py


def _add_delay_penalty(px, boundary, rnnt_type, delay_penalty):
    if delay_penalty <= 0.0:
        return px
    t1 = tf.shape(px)[2]
    t_len = t1 - 1 if rnnt_type == "regular" else t1
    if boundary is None:
        t_end = tf.fill([tf.shape(px)[0]], t_len)
    else:
        t_end = tf.cast(boundary, tf.int32)[:, 3]
    offset = tf.cast(t_end - 1, px.dtype) / 2
    t = tf.cast(tf.range(t1), px.dtype)
    penalty = (offset[:, tf.newaxis, tf.newaxis] - t) * delay_penalty
    return px + penalty


def _loss_from_logprobs(
    px, py, boundary, rnnt_type, delay_penalty, reduction, return_grad=False
):
    """The reduced loss of a lattice given as px, py (+ occupations)."""
    px = _add_delay_penalty(px, boundary, rnnt_type, delay_penalty)
    result = mutual_information_recursion(
        _mi_dtype(px), _mi_dtype(py), boundary, return_grad=return_grad
    )
    if return_grad:
        scores, grads = result
        return _reduce(scores, reduction), grads
    return _reduce(result, reduction)


def _reduce(negated_scores: tf.Tensor, reduction: str) -> tf.Tensor:
    if reduction == "none":
        return -negated_scores
    if reduction == "mean":
        return -tf.reduce_mean(negated_scores)
    return -tf.reduce_sum(negated_scores)


def _mi_dtype(x: tf.Tensor) -> tf.Tensor:
    """The recursion runs in float32 for half-precision inputs."""
    return x if x.dtype in (tf.float32, tf.float64) else tf.cast(x, tf.float32)
