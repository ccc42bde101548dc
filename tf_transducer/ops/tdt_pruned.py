# SPDX-License-Identifier: Apache-2.0
"""Pruned Token-and-Duration Transducer loss: k2's recipe for TDT.

As for the RNN-T (`rnnt_pruned`): a cheap loss whose joiner is addition
(`tdt_loss_simple`) gives the occupation of every lattice node; each frame
keeps the s_range consecutive symbol positions around them
(`get_tdt_prune_ranges`), the real joiner runs on those positions only
(`do_rnnt_pruning`), and `tdt_loss_pruned` takes its token and duration
logits [B, T, s_range, ...].

Why the maths holds: a TDT path is a sequence of nodes (t, u); a step from
(t, u) with duration d lands on (t + d, u') (u' = u or u + 1). Pruning
removes nodes, and with them every path through a removed node, exactly as
in the RNN-T; the loss over the remaining paths is the sum over a subset of
the full lattice's paths (so pruned loss >= full loss). The ranges keep a
path: the RNN-T path of durations 0 and 1 that the ranges of
`get_rnnt_prune_ranges` keep (durations always hold 0 and 1). Node
occupations replace the RNN-T's blank occupations in choosing the windows:
a TDT path does not visit every frame, and a frame it skips has less mass.
"""

from collections.abc import Sequence

import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import float_tensor
from tf_transducer._checks import in_xla_context
from tf_transducer.ops import _loader
from tf_transducer.ops._validation import _check_ranges
from tf_transducer.ops._validation import _dim
from tf_transducer.ops.rnnt_lattice import _reduce
from tf_transducer.ops.rnnt_pruned import _unprune
from tf_transducer.ops.rnnt_pruned import get_rnnt_prune_ranges
from tf_transducer.ops.tdt import DEFAULT_DURATIONS
from tf_transducer.ops.tdt import _check_inputs
from tf_transducer.ops.tdt import _xla_scores
from tf_transducer.ops.tdt import check_options


def get_tdt_prune_ranges(
    px_grad: TensorLike, py_grad: TensorLike, boundary: TensorLike, s_range: int
) -> tf.Tensor:
    """Pruning ranges [B, T, s_range] from a TDT lattice's occupations.

    `get_rnnt_prune_ranges` on the occupation of each node (its label and
    blank steps', px_grad + py_grad) in place of the RNN-T's blank
    occupations, with every frame free to advance (durations hold 0: any
    number of symbols a frame).

    Args:
      px_grad: float [B, S, T], the label steps' occupations
        (`tdt_loss_simple(..., return_grad=True)`).
      py_grad: float [B, S + 1, T], the blank steps'.
      boundary: int [B, 4] rows (0, 0, U_b, T_b).
      s_range: int >= 2, symbol positions kept a frame (values above S + 1
        act as S + 1).

    Returns:
      int64 [B, T, s_range], consecutive positions a frame, non-decreasing.
    """
    px_grad = float_tensor(px_grad, "px_grad", 3, "[B, S, T]")
    py_grad = float_tensor(py_grad, "py_grad", 3, "[B, S + 1, T]")
    nodes = py_grad + tf.pad(px_grad, [[0, 0], [0, 1], [0, 0]])
    regular = tf.pad(px_grad, [[0, 0], [0, 0], [0, 1]])  # T + 1 columns
    return get_rnnt_prune_ranges(regular, nodes, boundary, s_range)


def tdt_loss_pruned(
    token_logits: TensorLike, duration_logits: TensorLike, symbols: TensorLike,
    ranges: TensorLike, blank: int, durations: Sequence[int] = DEFAULT_DURATIONS,
    *, sigma: float = 0.0, reduction: str = "mean",
    logit_lengths: TensorLike | None = None, label_lengths: TensorLike | None = None,
    clamp: float = -1.0, fastemit_lambda: float = 0.0,
) -> tf.Tensor:  # fmt: skip
    """The TDT loss of a pruned joiner's logits, fused.

    `tdt_loss` on the lattice whose nodes (t, u) with u outside
    ranges[b, t] take no step: one C++ op as `tdt_loss`'s (nothing of
    [B, T, S + 1, C] is formed), and under XLA the pure-TF lattice.

    Args:
      token_logits: float [B, T, s_range, C]: the joiner at
        (t, ranges[b, t, j]).
      duration_logits: float [B, T, s_range, K], K = len(durations), the
        token logits' dtype.
      symbols: int [B, S], values in [0, C).
      ranges: int [B, T, s_range], consecutive positions in [0, S]
        (`get_tdt_prune_ranges`).
      blank: int in [0, C), the blank.
      durations: the K durations, as `tdt_loss`.
      sigma: float >= 0, subtracted from every token log-prob.
      reduction: "none" ([B] losses), "mean" or "sum".
      logit_lengths: optional int [B] frames, in [1, T]; default T.
      label_lengths: optional int [B] symbols, in [0, S]; default S.
      clamp: if > 0, each gradient element of each utterance's loss is
        clamped to [-clamp, clamp].
      fastemit_lambda: float >= 0, FastEmit, as `tdt_loss`.

    Returns:
      The loss: [B] with reduction "none", else a scalar.
    """
    durations, sigma, _, clamp, fastemit_lambda = check_options(
        durations, reduction, sigma, 0.0, clamp, fastemit_lambda
    )
    with tf.name_scope("tdt_loss_pruned"):
        tokens, durs, symbols, frames, labels = _check_inputs(
            token_logits, duration_logits, symbols, blank, durations,
            logit_lengths, label_lengths, pruned=True,
        )  # fmt: skip
        num_symbols = _dim(symbols, 1)
        ranges = _check_ranges(ranges, _dim(tokens, 0), _dim(tokens, 1), num_symbols)
        xla = in_xla_context()
        _loader.note_cpu_or_xla_path(xla)
        if xla:

            def log_probs(tokens, durs):
                width = tf.shape(symbols, out_type=tf.int64)[1] + 1
                begin = ranges[:, :, 0]
                # Each row's label is the symbol of its own position.
                padded = tf.pad(symbols, [[0, 0], [0, 1]])
                row_symbols = tf.gather(padded, ranges, axis=1, batch_dims=1)
                tokens_lp = tf.nn.log_softmax(tokens, axis=-1) - sigma
                label = tf.gather(tokens_lp, row_symbols[..., tf.newaxis], axis=3,
                                  batch_dims=3)[..., 0]  # fmt: skip
                blank_lp = tokens_lp[..., blank]
                dur = tf.nn.log_softmax(durs, axis=-1)
                label = _unprune(label, begin, width)[:, :, :-1]
                blank_lp = _unprune(blank_lp, begin, width)
                return label, blank_lp, _unprune(dur, begin, width)

            scores = _xla_scores(tokens, durs, log_probs, durations, frames, labels,
                                 clamp, fastemit_lambda)  # fmt: skip
        else:
            scores, *_ = _loader.op_library().tf_transducer_tdt_loss_pruned(
                token_logits=tokens,
                duration_logits=durs,
                symbols=symbols,
                ranges=ranges,
                logit_lengths=frames,
                label_lengths=labels,
                blank=blank,
                durations=list(durations),
                sigma=sigma,
                clamp=clamp,
                fastemit_lambda=fastemit_lambda,
                Tacc=tf.float64 if tokens.dtype == tf.float64 else tf.float32,
            )
        return _reduce(scores, reduction)
