# SPDX-License-Identifier: Apache-2.0
"""The Token-and-Duration Transducer loss (TDT; Xu et al., arXiv 2304.06795).

The joint predicts a token over C classes (blank included) and, normalised
apart, how many frames it covers: one of K `durations` (default
[0, 1, 2, 3, 4]; sorted, distinct, with 0 and 1). With token log-probs
tok = log_softmax(token_logits) - sigma and duration log-probs
dur = log_softmax(duration_logits), from lattice node (t, u):

- label y_u with duration d goes to (t + d, u + 1), weight
  tok[t, u, y_u] + dur[t, u, k(d)] (d = 0 allowed: several labels a frame);
- blank with duration d >= 1 goes to (t + d, u), weight
  tok[t, u, blank] + dur[t, u, k(d)].

Nodes exist for 0 <= t < T; a path starts at (0, 0) and ends with a blank
from (t, U) that lands exactly on T. The loss is -log P(y | x), the log-sum
over all paths, per utterance with its own T and U. `tdt_loss` runs one
fused C++ op (`TfTransducerTdtLoss`) and, under XLA, the same lattice in
pure TensorFlow (`tdt_tf`).
"""

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import clamp_value
from tf_transducer._checks import float_tensor
from tf_transducer._checks import in_xla_context
from tf_transducer._checks import integer_tensor
from tf_transducer._checks import real_number
from tf_transducer._checks import require
from tf_transducer.ops import _loader
from tf_transducer.ops._validation import REDUCTIONS
from tf_transducer.ops._validation import _check_symbols
from tf_transducer.ops._validation import _dim
from tf_transducer.ops.rnnt import _with_clamped_gradient
from tf_transducer.ops.rnnt import rnnt_loss
from tf_transducer.ops.rnnt_lattice import _reduce
from tf_transducer.ops.tdt_tf import tdt_log_probs
from tf_transducer.ops.tdt_tf import tdt_scores_of_log_probs

DEFAULT_DURATIONS = (0, 1, 2, 3, 4)
MAX_DURATIONS = 32  # the kernels' limit (cc/kernels/tdt_loss.h)


def check_durations(durations: Any, name: str = "durations") -> tuple[int, ...]:
    """durations as a tuple of ints: sorted, distinct, >= 0, with 0 and 1.

    At most MAX_DURATIONS of them (the kernels' limit).

    Raises ValueError naming `name` and what is wrong.
    """
    if isinstance(durations, (str, bytes)) or not isinstance(durations, Sequence):
        raise ValueError(f"{name} must be a list of ints, got {durations!r}")
    values = list(durations)
    if not all(isinstance(d, int) and not isinstance(d, bool) for d in values):
        raise ValueError(f"{name} must be a list of ints, got {values!r}")
    problems = [
        (any(d < 0 for d in values), "must be >= 0"),
        (len(set(values)) != len(values), "must be distinct"),
        (values != sorted(values), "must be sorted"),
        (0 not in values or 1 not in values, "must hold 0 and 1"),
        (len(values) > MAX_DURATIONS, f"may hold at most {MAX_DURATIONS} values"),
    ]
    for bad, what in problems:
        if bad:
            raise ValueError(f"{name} {what}, got {values}")
    return tuple(values)


def check_options(
    durations: Any, reduction: Any, sigma: Any, omega: Any = 0.0, clamp: Any = -1.0,
    fastemit_lambda: Any = 0.0,
) -> tuple[tuple[int, ...], float, float, float, float]:  # fmt: skip
    """The TDT losses' options, checked.

    Returns (durations, sigma, omega, clamp, fastemit_lambda); raises
    ValueError naming the bad one.
    """
    durations = check_durations(durations)
    if not isinstance(reduction, str) or reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    sigma = real_number("sigma", sigma, minimum=0.0)
    omega = real_number("omega", omega, minimum=0.0)
    if omega > 1:
        raise ValueError(f"omega must lie in [0, 1], got {omega:g}")
    clamp = clamp_value(clamp)
    fastemit_lambda = real_number("fastemit_lambda", fastemit_lambda, minimum=0.0)
    return durations, sigma, omega, float(clamp), fastemit_lambda


def _zero_beyond(x, lengths):
    """x [B, N, J] with the rows from lengths[b] on set to 0."""
    inside = tf.sequence_mask(lengths, tf.shape(x, out_type=lengths.dtype)[1])
    return tf.where(inside[..., tf.newaxis], x, tf.zeros_like(x))


def _check_blank(blank, num_classes):
    if not isinstance(blank, int) or isinstance(blank, bool):
        raise ValueError(f"blank must be a Python int, got {blank!r}")
    if blank < 0 or (isinstance(num_classes, int) and blank >= num_classes):
        raise ValueError(
            f"blank must lie in [0, C) with C = {num_classes}, got {blank}"
        )


def _lengths(lengths, name, batch, default, low, high):
    """int64 [B] lengths in [low, high]; `default` [B] when None."""
    if lengths is None:
        return tf.fill([batch], tf.cast(default, tf.int64))
    lengths = integer_tensor(lengths, name, 1, "[B]")
    if not in_xla_context():
        bad = (lengths < low) | (lengths > tf.cast(high, tf.int64))
        require(
            ~tf.reduce_any(bad),
            f"{name} must lie in [{low}, {{}}], got {{}}",
            high,
            lengths,
        )
    return lengths


def _check_inputs(token_logits, duration_logits, symbols, blank, durations,
                  logit_lengths, label_lengths, pruned=False):  # fmt: skip
    """The checked inputs; with `pruned`, logits of s_range rows a frame."""
    rows = "s_range" if pruned else "S + 1"
    tokens = float_tensor(token_logits, "token_logits", 4, f"[B, T, {rows}, C]")
    durs = float_tensor(duration_logits, "duration_logits", 4, f"[B, T, {rows}, K]")
    if durs.dtype != tokens.dtype:
        raise ValueError(
            f"duration_logits must have the dtype of token_logits "
            f"({tokens.dtype.name}), got {durs.dtype.name}"
        )
    if durs.shape[3] is not None and durs.shape[3] != len(durations):
        raise ValueError(
            f"duration_logits must have K = len(durations) = {len(durations)} "
            f"classes, got shape {durs.shape}"
        )
    if not tokens.shape[:3].is_compatible_with(durs.shape[:3]):
        raise ValueError(
            f"duration_logits {durs.shape} must share [B, T, {rows}] with "
            f"token_logits {tokens.shape}"
        )
    num_classes = _dim(tokens, 3)
    _check_blank(blank, num_classes)
    batch, frames = tf.shape(tokens)[0], _dim(tokens, 1)
    if pruned:
        symbols = integer_tensor(symbols, "symbols", 2, "[B, S]")
        num_symbols = _dim(symbols, 1)
    else:
        num_symbols = _dim(tokens, 2) - 1
    symbols = _check_symbols(symbols, _dim(tokens, 0), num_symbols, num_classes)
    logit_lengths = _lengths(logit_lengths, "logit_lengths", batch, frames, 1, frames)
    label_lengths = _lengths(
        label_lengths, "label_lengths", batch, num_symbols, 0, num_symbols
    )
    return tokens, durs, symbols, logit_lengths, label_lengths


@tf.RegisterGradient("TfTransducerTdtLoss")
@tf.RegisterGradient("TfTransducerTdtLossPruned")
def _tdt_loss_grad(op, d_scores, *unused_d_statistics):
    """The token logits' gradient from the RNN-T gradient op; the durations'.

    For pruned logits, the pruned RNN-T gradient op, and the durations'
    gradient gathered from every node's by the ranges.
    """
    tokens, durations, symbols = op.inputs[0], op.inputs[1], op.inputs[2]
    _, px_grad, py_grad, normalizers, duration_grad = op.outputs
    pruned = op.type == "TfTransducerTdtLossPruned"
    library = _loader.op_library()
    token_grad = library.tf_transducer_rnnt_loss_grad
    extra = {}
    if pruned:
        token_grad = library.tf_transducer_rnnt_loss_pruned_grad
        extra = dict(ranges=op.inputs[3])
        duration_grad = tf.gather(duration_grad, op.inputs[3], axis=2, batch_dims=2)
    d_tokens = token_grad(
        logits=tokens,
        symbols=symbols,
        px_grad=px_grad,
        py_grad=py_grad,
        normalizers=normalizers,
        scale=d_scores,
        termination_symbol=op.get_attr("blank"),
        rnnt_type="modified",  # px has T columns
        clamp=op.get_attr("clamp"),
        fastemit_lambda=op.get_attr("fastemit_lambda"),
        **extra,
    )
    scale = d_scores[:, tf.newaxis, tf.newaxis, tf.newaxis]
    d_durations = tf.cast(duration_grad * scale, durations.dtype)
    return [d_tokens, d_durations] + [None] * (len(op.inputs) - 2)


def _xla_scores(tokens, durs, log_probs, durations, logit_lengths, label_lengths,
                clamp, fastemit_lambda):  # fmt: skip
    """log P [B] in pure TensorFlow, with the op's FastEmit and clamp.

    log_probs(tokens, durs) -> the nodes' (label, blank, duration) log-probs
    (`tdt_log_probs`), of the inputs widened to float32 (float64 stays).
    """
    dtype = tf.float64 if tokens.dtype == tf.float64 else tf.float32

    def scores_of(tokens, durs):
        labels, blanks, dur = log_probs(tf.cast(tokens, dtype), tf.cast(durs, dtype))
        return tdt_scores_of_log_probs(labels, blanks, dur, durations, logit_lengths,
                                       label_lengths, fastemit_lambda)  # fmt: skip

    if clamp <= 0:
        return scores_of(tokens, durs)
    # Clamp both inputs' gradients: one tensor through the clamped gradient.
    num_classes = tf.shape(tokens)[3]
    both = tf.concat([tokens, durs], axis=3)
    return _with_clamped_gradient(
        lambda x: scores_of(x[..., :num_classes], x[..., num_classes:]), both, clamp
    )


def tdt_loss(
    token_logits: TensorLike, duration_logits: TensorLike, symbols: TensorLike,
    blank: int, durations: Sequence[int] = DEFAULT_DURATIONS, *, sigma: float = 0.0,
    omega: float = 0.0, reduction: str = "mean",
    logit_lengths: TensorLike | None = None, label_lengths: TensorLike | None = None,
    clamp: float = -1.0, fastemit_lambda: float = 0.0,
) -> tf.Tensor:  # fmt: skip
    """The Token-and-Duration Transducer loss, fused (module docstring).

    One C++ op log-softmaxes both heads, runs the lattice's forward and
    backward recursions and keeps the occupations of its steps (O(B T S K));
    the gradient of the token logits is then one pass over them, as
    `rnnt_loss`'s. float16 and bfloat16 logits are read as such and computed
    in float32. Under XLA (`jit_compile=True`) the same loss runs in pure
    TensorFlow.

    Args:
      token_logits: float [B, T, S + 1, C], the joint's token logits.
      duration_logits: float [B, T, S + 1, K], K = len(durations), the
        token logits' dtype.
      symbols: int [B, S], values in [0, C).
      blank: int in [0, C), the blank.
      durations: the K frame counts the duration head predicts: sorted,
        distinct, >= 0, with 0 and 1.
      sigma: float >= 0, subtracted from every token log-prob (the paper's
        logit under-normalisation; 0: none).
      omega: float in [0, 1]: the loss is (1 - omega) * TDT + omega * the
        RNN-T loss of the token logits (log-softmaxed alike, sigma
        included: sigma * (T + U) on every RNN-T path). NeMo draws one or
        the other per batch with probability omega; this mixes both.
      reduction: "none" ([B] losses), "mean" or "sum".
      logit_lengths: optional int [B] frames, in [1, T]; default T.
      label_lengths: optional int [B] symbols, in [0, S]; default S.
      clamp: if > 0, each element of the gradient of each utterance's loss
        with respect to either logits is clamped to [-clamp, clamp].
      fastemit_lambda: float >= 0, FastEmit (arXiv 2010.11148): the gradient
        through every label step (its token and its duration) is scaled by
        (1 + fastemit_lambda); the loss value is unchanged.

    Returns:
      The loss: [B] with reduction "none", else a scalar.
    """
    durations, sigma, omega, clamp, fastemit_lambda = check_options(
        durations, reduction, sigma, omega, clamp, fastemit_lambda
    )
    with tf.name_scope("tdt_loss"):
        tokens, durs, symbols, frames, labels = _check_inputs(
            token_logits, duration_logits, symbols, blank, durations,
            logit_lengths, label_lengths,
        )  # fmt: skip
        xla = in_xla_context()
        _loader.note_cpu_or_xla_path(xla)
        if xla:
            scores = _xla_scores(
                tokens, durs,
                lambda x, d: tdt_log_probs(x, d, symbols, blank, sigma),
                durations, frames, labels, clamp, fastemit_lambda,
            )  # fmt: skip
        else:
            scores, *_ = _loader.op_library().tf_transducer_tdt_loss(
                token_logits=tokens,
                duration_logits=durs,
                symbols=symbols,
                logit_lengths=frames,
                label_lengths=labels,
                blank=blank,
                durations=list(durations),
                sigma=sigma,
                clamp=float(clamp),
                fastemit_lambda=float(fastemit_lambda),
                Tacc=tf.float64 if tokens.dtype == tf.float64 else tf.float32,
            )
        if omega > 0:
            rnnt = -rnnt_loss(
                tokens, symbols, blank, reduction="none", logit_lengths=frames,
                label_lengths=labels, clamp=clamp, fastemit_lambda=fastemit_lambda,
            )  # fmt: skip
            rnnt -= sigma * tf.cast(frames + labels, rnnt.dtype)
            scores = (1 - omega) * scores + omega * tf.cast(rnnt, scores.dtype)
        return _reduce(scores, reduction)
