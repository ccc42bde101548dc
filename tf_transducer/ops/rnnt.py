# SPDX-License-Identifier: Apache-2.0
"""RNN-T losses on the mutual-information recursion (k2 / fast_rnnt family).

Every loss here maps an RNN-T lattice to the (px, py) form of
`mutual_information_recursion`: for a sequence of S symbols and T frames,

    px[b, s, t]: log-prob of emitting symbols[b, s] at (s, t)
    py[b, s, t]: log-prob of the termination ("blank") symbol at (s, t)

and the loss is minus the log-sum over all alignments.  rnnt_type picks the
lattice:

  regular:     a symbol keeps the frame.  px is [B, S, T + 1]; px[:, :, T]
               and, with a boundary, px[b, :, t_end] are -inf: no symbol
               after the last frame.  S > T is allowed.
  modified:    a symbol also moves to the next frame.  px is [B, S, T];
               needs T >= S.
  constrained: as modified, but a symbol also pays the blank of the next
               context on the same frame: px += py[:, 1:].  Needs T >= S.

`delay_penalty` adds ((t_end - 1) / 2 - t) * delay_penalty to px[b, :, t],
rewarding early symbols (k2 issue 955); t_end is T without a boundary.

Argument checks that need values (symbol range, T >= S on dynamic shapes)
run as graph assertions, which raise InvalidArgumentError, and are skipped
under XLA.

This module holds the loss on full joiner logits (`rnnt_loss`, a fused C++
op and its registered gradient, `get_rnnt_logprobs_joint` under XLA); the
simple loss lives in `rnnt_simple` and the steps every loss shares in
`rnnt_lattice`, and their public names are importable from here too.
"""

from collections.abc import Callable

import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import clamp_value
from tf_transducer._checks import in_xla_context
from tf_transducer._checks import real_number
from tf_transducer.ops import _loader
from tf_transducer.ops._validation import REDUCTIONS
from tf_transducer.ops._validation import RNNT_TYPES
from tf_transducer.ops._validation import _check_boundary
from tf_transducer.ops._validation import _check_logits
from tf_transducer.ops._validation import _check_options
from tf_transducer.ops._validation import _dim
from tf_transducer.ops._validation import default_boundary
from tf_transducer.ops.mutual_information import mutual_information_recursion
from tf_transducer.ops.rnnt_lattice import _NEG_INF
from tf_transducer.ops.rnnt_lattice import _add_delay_penalty
from tf_transducer.ops.rnnt_lattice import _finish_logprobs
from tf_transducer.ops.rnnt_lattice import _mi_dtype
from tf_transducer.ops.rnnt_lattice import _reduce
from tf_transducer.ops.rnnt_lattice import _resolve_boundary
from tf_transducer.ops.rnnt_lattice import boundary_from_lengths
from tf_transducer.ops.rnnt_simple import get_rnnt_logprobs
from tf_transducer.ops.rnnt_simple import rnnt_loss_simple

# The public names, those of rnnt_lattice and rnnt_simple included.
__all__ = [
    "REDUCTIONS",
    "RNNT_TYPES",
    "boundary_from_lengths",
    "get_rnnt_logprobs",
    "get_rnnt_logprobs_joint",
    "rnnt_loss",
    "rnnt_loss_simple",
]


def get_rnnt_logprobs_joint(
    logits: TensorLike,
    symbols: TensorLike,
    termination_symbol: int,
    boundary: TensorLike | None = None,
    rnnt_type: str = "regular",
) -> tuple[tf.Tensor, tf.Tensor]:
    """px, py from full joiner logits.

    Args:
      logits: float [B, T, S + 1, C].
      symbols: int [B, S], values in [0, C); S may be 0 (every transcript
        empty: each frame emits a blank).
      termination_symbol: int in [0, C), the blank.
      boundary: optional int [B, 4] rows (s_begin, t_begin, s_end, t_end).
      rnnt_type: "regular", "modified" or "constrained".

    Returns:
      px: [B, S, T + 1] (regular) or [B, S, T]; py: [B, S + 1, T].
    """
    _check_options(rnnt_type)
    with tf.name_scope("get_rnnt_logprobs_joint"):
        logits, symbols = _check_logits(logits, symbols, termination_symbol, rnnt_type)
        logits = _mi_dtype(logits)
        normalizers = tf.transpose(tf.reduce_logsumexp(logits, axis=3), [0, 2, 1])
        index = tf.broadcast_to(
            symbols[:, tf.newaxis, :, tf.newaxis],
            tf.concat([tf.shape(logits)[:2], tf.shape(symbols)[1:], [1]], axis=0),
        )
        px = tf.gather(logits[:, :, :-1], index, axis=3, batch_dims=3)[..., 0]
        px = tf.transpose(px, [0, 2, 1]) - normalizers[:, :-1]  # [B, S, T]
        if rnnt_type == "regular":
            px = tf.pad(px, [[0, 0], [0, 0], [0, 1]], constant_values=_NEG_INF)
        py = tf.transpose(logits[..., termination_symbol], [0, 2, 1]) - normalizers
        return _finish_logprobs(px, py, boundary, rnnt_type)


def _fused_op_inputs(
    logits, symbols, termination_symbol, boundary, rnnt_type, delay_penalty,
    pruned=False,
):  # fmt: skip
    """Checked inputs of the fused ops: (logits, symbols, boundary, penalty).

    logits [B, T, S + 1, C] (or [B, T, s_range, C] when pruned), as given:
    the ops read float16 / bfloat16 logits as such (no float32 copy) and
    compute in float32; symbols int64 [B, S]; boundary int64 [B, 4],
    (0, 0, S, T) rows by default; the delay penalty as a scalar of the dtype
    the ops compute in (float64 for float64 logits, else float32).
    """
    logits, symbols = _check_logits(
        logits, symbols, termination_symbol, rnnt_type, pruned
    )
    if boundary is None:
        shape = tf.shape(logits, out_type=tf.int64)
        boundary = default_boundary(
            shape[0], tf.shape(symbols, out_type=tf.int64)[1], shape[1]
        )
    else:
        boundary = _check_boundary(boundary, logits.shape[0])
    compute_dtype = tf.float64 if logits.dtype == tf.float64 else tf.float32
    return logits, symbols, boundary, tf.constant(delay_penalty, compute_dtype)


def _with_clamped_gradient(scores_fn, logits, clamp):
    """scores_fn(logits) [B], whose per-utterance gradient is clamped.

    Each utterance's score depends on its own logits only, so the gradient of
    sum(scores) holds every utterance's gradient unmixed.  Used on the XLA
    path only, which is always a graph: tf.gradients works inside the
    forward function, where tapes do not record.
    """

    @tf.custom_gradient
    def scores_of(x):
        scores = scores_fn(x)
        (grad,) = tf.gradients(tf.reduce_sum(scores), [x])

        def backward(d_scores):
            clamped = tf.clip_by_value(grad, -clamp, clamp)
            return clamped * tf.cast(d_scores, grad.dtype)[:, None, None, None]

        return scores, backward

    return scores_of(logits)


def _composite_scores(
    logprobs_fn: Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor]], logits: tf.Tensor,
    boundary: tf.Tensor | None, rnnt_type: str, delay_penalty: float, clamp: float,
    fastemit_lambda: float,
) -> tf.Tensor:  # fmt: skip
    """The negated scores [B] of logits [B, T, R, C] in pure TF.

    This is the XLA path of the fused losses: logprobs_fn(logits) -> (px, py),
    then the delay penalty, FastEmit and clamp as the C++ op applies them.
    """

    def scores_of(x):
        px, py = logprobs_fn(x)
        px = _add_delay_penalty(px, boundary, rnnt_type, delay_penalty)
        if fastemit_lambda > 0:
            # The same value, its gradient times (1 + lambda); -inf entries
            # (no step) are left alone.
            delta = px - tf.stop_gradient(px)
            px += fastemit_lambda * tf.where(
                tf.math.is_finite(px), delta, tf.zeros_like(px)
            )
        return mutual_information_recursion(_mi_dtype(px), _mi_dtype(py), boundary)

    if clamp > 0:
        return _with_clamped_gradient(scores_of, logits, clamp)
    return scores_of(logits)


@tf.RegisterGradient("TfTransducerRnntLoss")
def _rnnt_loss_grad(op, d_scores, *unused_d_statistics):
    """One pass over the logits: the forward op kept what it needs."""
    logits, symbols = op.inputs[0], op.inputs[1]
    _, px_grad, py_grad, normalizers = op.outputs
    d_logits = _loader.op_library().tf_transducer_rnnt_loss_grad(
        logits=logits,
        symbols=symbols,
        px_grad=px_grad,
        py_grad=py_grad,
        normalizers=normalizers,
        scale=d_scores,
        **_gradient_attrs(op),
    )
    return [d_logits, None, None, None]


def _gradient_attrs(op):
    names = ("termination_symbol", "rnnt_type", "clamp", "fastemit_lambda")
    return {name: op.get_attr(name) for name in names}


def rnnt_loss(
    logits: TensorLike, symbols: TensorLike, termination_symbol: int,
    boundary: TensorLike | None = None, rnnt_type: str = "regular",
    delay_penalty: float = 0.0, reduction: str = "mean",
    logit_lengths: TensorLike | None = None, label_lengths: TensorLike | None = None,
    clamp: float = -1.0, fastemit_lambda: float = 0.0,
) -> tf.Tensor:  # fmt: skip
    """The RNN-T loss on full joiner logits, fused.

    One C++ op computes the log-softmax normalisers, gathers the symbol and
    blank log-probs, runs the recursion and produces the gradient with
    respect to the logits, with no log-softmax of the logits in memory: the
    only tensor of the logits' size it allocates is the gradient.  float16
    and bfloat16 logits are read as such and computed in float32 (the loss
    is float32, the gradient of the logits' dtype).  Under XLA (`jit_compile=True`),
    where custom ops cannot run, the same loss is computed from
    `get_rnnt_logprobs_joint` and the pure-TF recursion.

    Args:
      logits: float [B, T, S + 1, C], the joiner's output.
      symbols: int [B, S], values in [0, C); S may be 0 (every transcript
        empty: each frame emits a blank).
      termination_symbol: int in [0, C), the blank.
      boundary: optional int [B, 4] rows (s_begin, t_begin, s_end, t_end),
        default (0, 0, S, T).
      rnnt_type: "regular", "modified" or "constrained".
      delay_penalty: float >= 0, see the module docstring.
      reduction: "none" ([B] losses), "mean" or "sum" (scalars).
      logit_lengths: optional int [B] frames, with label_lengths instead of
        boundary: the same as boundary rows (0, 0, label_length, logit_length).
      label_lengths: optional int [B] symbols, with logit_lengths.
      clamp: if > 0, each element of the gradient of each utterance's loss
        with respect to the logits is clamped to [-clamp, clamp] (as
        torchaudio's `clamp`); <= 0 or +inf clamps nothing.
      fastemit_lambda: float >= 0, FastEmit regularisation (arXiv
        2010.11148): the gradient through every symbol step is scaled by
        (1 + fastemit_lambda), which favours emitting early; the loss value
        is unchanged.

    Returns:
      The loss: [B] with reduction "none", else a scalar.
    """
    delay_penalty = _check_options(rnnt_type, reduction, delay_penalty)
    clamp = clamp_value(clamp)
    fastemit_lambda = real_number("fastemit_lambda", fastemit_lambda, minimum=0.0)
    with tf.name_scope("rnnt_loss"):
        logits = tf.convert_to_tensor(logits, name="logits")
        if logits.shape.rank == 4:
            boundary = _resolve_boundary(
                boundary,
                logit_lengths,
                label_lengths,
                _dim(logits, 1),
                _dim(logits, 2) - 1,
            )
        xla = in_xla_context()
        _loader.note_cpu_or_xla_path(xla)
        if xla:
            scores = _composite_scores(
                lambda x: get_rnnt_logprobs_joint(
                    x, symbols, termination_symbol, boundary, rnnt_type
                ),
                logits, boundary, rnnt_type, delay_penalty, clamp, fastemit_lambda,
            )  # fmt: skip
            return _reduce(scores, reduction)
        logits, symbols, boundary, penalty = _fused_op_inputs(
            logits, symbols, termination_symbol, boundary, rnnt_type, delay_penalty
        )
        scores, *_ = _loader.op_library().tf_transducer_rnnt_loss(
            logits=logits,
            symbols=symbols,
            boundary=boundary,
            delay_penalty=penalty,
            termination_symbol=termination_symbol,
            rnnt_type=rnnt_type,
            clamp=float(clamp),
            fastemit_lambda=float(fastemit_lambda),
        )
        return _reduce(scores, reduction)
