# SPDX-License-Identifier: Apache-2.0
"""The "simple" Token-and-Duration Transducer loss: the joiner is addition.

k2's simple loss for TDT. Token logits lm[b, u] + am[b, t] (their
log-softmax taken without forming [B, T, S + 1, C], as
`get_rnnt_logprobs`), and duration logits lm_durations[b, u] +
am_durations[b, t] ([B, T, S + 1, K], small). The lattice is `tdt_loss`'s.
Its occupations (`return_grad=True`) give the pruning ranges of
`tdt_loss_pruned` (`get_tdt_prune_ranges`).
"""

from collections.abc import Sequence

import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import after
from tf_transducer._checks import finite_or_neg_inf
from tf_transducer._checks import float_tensor
from tf_transducer._checks import require
from tf_transducer.ops._validation import _dim
from tf_transducer.ops.rnnt_lattice import _reduce
from tf_transducer.ops.rnnt_simple import _boundary_for_simple
from tf_transducer.ops.rnnt_simple import _simple_loss_inputs
from tf_transducer.ops.rnnt_simple import get_rnnt_logprobs
from tf_transducer.ops.tdt import DEFAULT_DURATIONS
from tf_transducer.ops.tdt import _zero_beyond
from tf_transducer.ops.tdt import check_options
from tf_transducer.ops.tdt_lattice import tdt_lattice_scores


def _check_durations_of(x, name, rows_of, rows_name, num_durations):
    """x as a float [B, rows, K] tensor whose B and rows are rows_of's."""
    x = float_tensor(x, name, 3, f"[B, {rows_name}, K]")
    if x.shape[2] is not None and x.shape[2] != num_durations:
        raise ValueError(
            f"{name} must have K = len(durations) = {num_durations} classes, "
            f"got shape {x.shape}"
        )
    for axis, what in ((0, "B"), (1, rows_name)):
        mine, theirs = x.shape[axis], rows_of.shape[axis]
        if mine is not None and theirs is not None:
            if mine != theirs:
                raise ValueError(f"{name} {x.shape} must have {what} = {theirs}")
        else:
            require(
                tf.equal(tf.shape(x)[axis], tf.shape(rows_of)[axis]),
                f"{name} must have {what} = {{}}, got shape {{}}",
                tf.shape(rows_of)[axis],
                tf.shape(x),
            )
    return x


def tdt_loss_simple(
    lm: TensorLike, am: TensorLike, lm_durations: TensorLike, am_durations: TensorLike,
    symbols: TensorLike, blank: int, durations: Sequence[int] = DEFAULT_DURATIONS,
    *, sigma: float = 0.0, reduction: str = "mean",
    logit_lengths: TensorLike | None = None, label_lengths: TensorLike | None = None,
    return_grad: bool = False,
) -> tf.Tensor | tuple[tf.Tensor, tuple[tf.Tensor, tf.Tensor]]:  # fmt: skip
    """The TDT loss whose joiner is addition, for both heads.

    Args:
      lm: float [B, S + 1, C], the prediction network's token part.
      am: float [B, T, C], the encoder's token part.
      lm_durations: float [B, S + 1, K], K = len(durations): the prediction
        network's duration part.
      am_durations: float [B, T, K], the encoder's.
      symbols: int [B, S], values in [0, C).
      blank: int in [0, C), the blank.
      durations: the K durations, as `tdt_loss`.
      sigma: float >= 0, subtracted from every token log-prob.
      reduction: "none" ([B] losses), "mean" or "sum".
      logit_lengths: optional int [B] frames, in [1, T]; with label_lengths.
      label_lengths: optional int [B] symbols, in [0, S].
      return_grad: also return (px_grad [B, S, T], py_grad [B, S + 1, T]),
        the occupations of each node's label and blank steps, as constants:
        what `get_tdt_prune_ranges` takes.

    Returns:
      loss, or (loss, (px_grad, py_grad)) with return_grad.
    """
    durations, sigma, _, _, _ = check_options(durations, reduction, sigma)
    with tf.name_scope("tdt_loss_simple"):
        boundary = _boundary_for_simple(None, logit_lengths, label_lengths, lm, am)
        lm, am = _simple_loss_inputs(lm, am, boundary)
        # The regular lattice's px holds every node's label log-prob (its
        # last column, t = T, is the regular lattice's own -inf).
        px, py = get_rnnt_logprobs(lm, am, symbols, blank, "regular", boundary)
        num_frames = tf.shape(py)[2]
        px = px[:, :, :num_frames]
        lm_durations = _check_durations_of(
            lm_durations, "lm_durations", lm, "S + 1", len(durations)
        )
        am_durations = _check_durations_of(
            am_durations, "am_durations", am, "T", len(durations)
        )
        batch = tf.shape(py, out_type=tf.int64)[0]
        if boundary is None:
            frames = tf.fill([batch], tf.cast(num_frames, tf.int64))
            labels = tf.fill([batch], tf.cast(_dim(py, 1) - 1, tf.int64))
        else:
            frames, labels = boundary[:, 3], boundary[:, 2]
        # As lm and am: 0 beyond the lengths, checked within them.
        am_durations = _zero_beyond(am_durations, frames)
        lm_durations = _zero_beyond(lm_durations, labels + 1)
        with after(
            finite_or_neg_inf(am_durations, "am_durations"),
            finite_or_neg_inf(lm_durations, "lm_durations"),
        ):
            duration_logits = tf.cast(
                am_durations[:, :, tf.newaxis] + lm_durations[:, tf.newaxis], px.dtype
            )
        result = tdt_lattice_scores(
            px, py, duration_logits, durations, frames, labels, sigma=sigma,
            return_grad=return_grad,
        )  # fmt: skip
        if not return_grad:
            return _reduce(result, reduction)
        scores, (px_grad, py_grad, _) = result
        return _reduce(scores, reduction), (px_grad, py_grad)
