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
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import tensorflow as tf

from tf_transducer._checks import (
    TensorLike,
    after,
    clamp_value,
    finite_or_neg_inf,
    first_bad,
    float_tensor,
    in_xla_context,
    integer_tensor,
    real_number,
    require,
)
from tf_transducer.ops import _loader
from tf_transducer.ops._validation import (  # noqa: F401 (RNNT_TYPES, REDUCTIONS)
    REDUCTIONS,
    RNNT_TYPES,
    _check_boundary,
    _check_boundary_values,
    _check_frames,
    _check_logits,
    _check_options,
    _check_symbols,
    _check_termination,
    _dim,
    default_boundary,
)
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


def _boundary_for_simple(boundary, logit_lengths, label_lengths, lm, am):
    """boundary of the simple losses, or one built from the lengths."""
    if logit_lengths is None and label_lengths is None:
        return boundary if boundary is None else _check_boundary(boundary)
    lm = tf.convert_to_tensor(lm, name="lm")
    am = tf.convert_to_tensor(am, name="am")
    if lm.shape.rank != 3 or am.shape.rank != 3:
        return boundary  # get_rnnt_logprobs names the bad one
    return _resolve_boundary(
        boundary, logit_lengths, label_lengths, _dim(am, 1), _dim(lm, 1) - 1
    )


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


def get_rnnt_logprobs(
    lm: TensorLike,
    am: TensorLike,
    symbols: TensorLike,
    termination_symbol: int,
    rnnt_type: str = "regular",
    boundary: TensorLike | None = None,
) -> tuple[tf.Tensor, tf.Tensor]:
    """px, py of the "simple" RNN-T, whose joiner is lm + am.

    The log-probs are log_softmax(lm[b, s] + am[b, t]) at the symbol and at
    the termination symbol, computed without forming [B, S + 1, T, C]: the
    normalisers are log((exp(lm) @ exp(am)^T)) with max-shifts for range
    (see `_simple_parts`). Half-precision inputs are computed in float32.

    Args:
      lm: float [B, S + 1, C], the prediction-network ("language model") part.
      am: float [B, T, C], the encoder ("acoustic model") part.
      symbols: int [B, S], values in [0, C).
      termination_symbol: int in [0, C), the blank.
      rnnt_type: "regular", "modified" or "constrained".
      boundary: optional int [B, 4] rows (s_begin, t_begin, s_end, t_end).

    Returns:
      px: [B, S, T + 1] (regular) or [B, S, T]; py: [B, S + 1, T]; float32
      or float64.
    """
    _check_options(rnnt_type)
    with tf.name_scope("get_rnnt_logprobs"):
        lm, am, symbols, _ = _simple_inputs(
            lm, am, symbols, termination_symbol, rnnt_type, boundary
        )

        def logprobs(lm, am):
            parts = _simple_parts(lm, am, symbols, termination_symbol, rnnt_type)
            px = parts.px_am + parts.px_lm
            px -= _pad_frames(_split_last_row(parts.normalizers)[0], rnnt_type)
            py = parts.py_am + parts.py_lm - parts.normalizers
            return px, py, parts.fits

        px, py = _with_float64_fallback(logprobs, lm, am)
        return _finish_logprobs(px, py, boundary, rnnt_type)


def _tiny(dtype):
    return tf.constant(tf.experimental.numpy.finfo(dtype.as_numpy_dtype).tiny, dtype)


# The smallest exp-domain normaliser the float32 simple loss trusts: below it
# log() loses precision and its gradient 1 / x overflows once summed over
# frames, so the log-probs are computed again in float64.
_FLOAT32_SAFE_MIN = 1e-30


def _split_last_row(x):
    """x [B, R, ...] -> (x[:, :-1], x[:, -1:]).

    A split, whose gradient is a concat: a strided slice's is several times
    slower.
    """
    return tf.split(x, tf.stack([tf.shape(x)[1] - 1, 1]), axis=1)


def _pad_frames(x, rnnt_type):
    """[..., T] -> [..., T + 1] with a 0 for regular px (whose column T is -inf)."""
    if rnnt_type != "regular":
        return x
    return tf.pad(x, [[0, 0]] * (x.shape.rank - 1) + [[0, 1]])


def _simple_inputs(
    lm: TensorLike,
    am: TensorLike,
    symbols: TensorLike,
    termination_symbol: int,
    rnnt_type: str,
    boundary: TensorLike | None,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor | None]:
    """Checked (lm, am, symbols, used rows) of the simple log-probs.

    lm and am come back as float32 (half precision in) or float64; the used
    rows are those of lm inside the boundary, bool [B, S + 1] (None without a
    boundary).
    """
    lm = float_tensor(lm, "lm", 3, "[B, S + 1, C]")
    am = float_tensor(am, "am", 3, "[B, T, C]")
    dtype = tf.float64 if tf.float64 in (lm.dtype, am.dtype) else tf.float32
    lm, am = tf.cast(lm, dtype), tf.cast(am, dtype)
    for axis, what in ((0, "B"), (2, "C")):
        if (
            None not in (lm.shape[axis], am.shape[axis])
            and lm.shape[axis] != am.shape[axis]
        ):
            raise ValueError(f"lm {lm.shape} and am {am.shape} must agree in {what}")
        if None in (lm.shape[axis], am.shape[axis]):
            require(
                tf.equal(tf.shape(lm)[axis], tf.shape(am)[axis]),
                f"lm and am must agree in {what}, got lm {{}} and am {{}}",
                tf.shape(lm),
                tf.shape(am),
            )
    _check_termination(termination_symbol, _dim(am, 2))
    symbols = _check_symbols(symbols, _dim(am, 0), _dim(lm, 1) - 1, _dim(am, 2))
    _check_frames(_dim(am, 1), _dim(symbols, 1), rnnt_type)
    if boundary is None:
        return lm, am, symbols, None
    used_rows, _ = _used_by_boundary(_check_boundary(boundary, lm.shape[0]), lm, am)
    return lm, am, symbols, used_rows


def _used_by_boundary(boundary, lm, am):
    """(rows of lm [B, S + 1], frames of am [B, T]) inside the boundary."""
    s = tf.range(tf.shape(lm, out_type=tf.int64)[1])[tf.newaxis]
    t = tf.range(tf.shape(am, out_type=tf.int64)[1])[tf.newaxis]
    rows = (s >= boundary[:, 0:1]) & (s <= boundary[:, 2:3])
    frames = (t >= boundary[:, 1:2]) & (t < boundary[:, 3:4])
    return rows, frames


def _simple_loss_inputs(
    lm: TensorLike, am: TensorLike, boundary: TensorLike | None
) -> tuple[tf.Tensor, tf.Tensor]:
    """lm and am of a simple loss, zeroed outside the boundary and checked inside.

    The rows and frames outside the boundary become 0, so that padding is
    never read: no value there can reach the loss or raise. Inside it, NaN /
    +inf are checked for.
    """
    lm = float_tensor(lm, "lm", 3, "[B, S + 1, C]")
    am = float_tensor(am, "am", 3, "[B, T, C]")
    if boundary is not None:
        boundary = _check_boundary(boundary, _dim(lm, 0))
        rows, frames = _used_by_boundary(boundary, lm, am)
        # 0 where the mask is 0, even for NaN or inf (a broadcast select
        # costs several times this product).
        lm = tf.math.multiply_no_nan(lm, tf.cast(rows, lm.dtype)[..., tf.newaxis])
        am = tf.math.multiply_no_nan(am, tf.cast(frames, am.dtype)[..., tf.newaxis])
    finite_or_neg_inf(lm, "lm")
    finite_or_neg_inf(am, "am")
    return lm, am


def _with_float64_fallback(
    logprobs_fn: Callable[[tf.Tensor, tf.Tensor], Any], lm: tf.Tensor, am: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """(px, py) = logprobs_fn(lm, am)[:2], with a float64 retry on underflow.

    When the float32 computation reports (third result False) that it
    underflowed, it is computed again in float64 and cast back to float32.
    """
    px, py, fits = logprobs_fn(lm, am)
    if lm.dtype == tf.float64:
        return px, py

    def exact():
        px64, py64, _ = logprobs_fn(tf.cast(lm, tf.float64), tf.cast(am, tf.float64))
        return tf.cast(px64, px.dtype), tf.cast(py64, py.dtype)

    return tf.cond(fits, lambda: (px, py), exact)


class _SimpleParts(NamedTuple):
    """The pieces of the simple joiner's log-probs (see `_simple_parts`)."""

    lm_max: tf.Tensor  # [B, S + 1, 1]
    am_max: tf.Tensor  # [B, T, 1]
    lm_probs: tf.Tensor  # exp(lm - lm_max) [B, S + 1, C]
    am_probs: tf.Tensor  # exp(am - am_max) [B, T, C]
    normalizers: tf.Tensor  # [B, S + 1, T]
    px_am: tf.Tensor  # am at the symbols [B, S, T (+ 1)]
    px_lm: tf.Tensor  # lm at the symbols [B, S, 1]
    py_am: tf.Tensor  # am at the blank [B, 1, T]
    py_lm: tf.Tensor  # lm at the blank [B, S + 1, 1]
    fits: tf.Tensor  # bool: every normaliser is in range for this dtype


def _simple_parts(lm, am, symbols, termination_symbol, rnnt_type):
    """The pieces of the simple joiner's log-probs, from checked inputs.

    normalizers[b, s, t] = log sum_c exp(lm[b, s, c] + am[b, t, c]), from
    exp(lm - lm_max) @ exp(am - am_max)^T (plus the smallest normal number,
    so that the log stays finite) without forming [B, S + 1, T, C].
    """
    lm_max = tf.stop_gradient(tf.reduce_max(lm, axis=2, keepdims=True))
    am_max = tf.stop_gradient(tf.reduce_max(am, axis=2, keepdims=True))
    lm_probs, am_probs = tf.exp(lm - lm_max), tf.exp(am - am_max)
    products = tf.matmul(lm_probs, am_probs, transpose_b=True)
    normalizers = (
        tf.math.log(products + _tiny(lm.dtype))
        + lm_max
        + tf.transpose(am_max, [0, 2, 1])
    )  # [B, S + 1, T]
    if lm.dtype == tf.float32:
        fits = tf.reduce_all(products >= _FLOAT32_SAFE_MIN)
    else:
        fits = tf.constant(True)
    # picks: the symbols, then the blank, [B, S + 1]. One gather of am and
    # one of lm read every term of px and py; their gradients are scatters
    # into zeros (no slice of am or lm on the gradient path).
    blanks = tf.fill(
        [tf.shape(symbols)[0], tf.shape(symbols)[1] + 1],
        tf.cast(termination_symbol, symbols.dtype),
    )
    picks = tf.concat([symbols, blanks[:, :1]], axis=1)
    am_picked = tf.transpose(
        tf.gather(am, picks, axis=2, batch_dims=1), [0, 2, 1]
    )  # [B, S + 1, T]
    lm_picked = tf.gather(
        lm, tf.stack([picks, blanks], axis=2), axis=2, batch_dims=2
    )  # [B, S + 1, 2]: lm at picks, lm at the blank
    px_am, py_am = _split_last_row(am_picked)
    if rnnt_type == "regular":
        px_am = tf.pad(px_am, [[0, 0], [0, 0], [0, 1]], constant_values=_NEG_INF)
    return _SimpleParts(
        lm_max=lm_max,
        am_max=am_max,
        lm_probs=lm_probs,
        am_probs=am_probs,
        normalizers=normalizers,
        px_am=px_am,
        px_lm=_split_last_row(lm_picked)[0][..., :1],
        py_am=py_am,
        py_lm=lm_picked[:, :, 1:],
        fits=fits,
    )


def rnnt_loss_simple(
    lm: TensorLike,
    am: TensorLike,
    symbols: TensorLike,
    termination_symbol: int,
    boundary: TensorLike | None = None,
    rnnt_type: str = "regular",
    delay_penalty: float = 0.0,
    reduction: str = "mean",
    return_grad: bool = False,
    logit_lengths: TensorLike | None = None,
    label_lengths: TensorLike | None = None,
) -> tf.Tensor | tuple[tf.Tensor, tuple[tf.Tensor, tf.Tensor]]:
    """RNN-T loss whose joiner is addition: log_softmax(lm[b, s] + am[b, t]).

    Args:
      lm: float [B, S + 1, C].
      am: float [B, T, C].
      symbols: int [B, S], values in [0, C).
      termination_symbol: int in [0, C), the blank.
      boundary: optional int [B, 4] rows (s_begin, t_begin, s_end, t_end),
        default (0, 0, S, T).
      rnnt_type: "regular", "modified" or "constrained".
      delay_penalty: float >= 0, see the module docstring.
      reduction: "none" ([B] losses), "mean" or "sum" (scalars).
      return_grad: also return (px_grad, py_grad), the occupation
        probabilities of the lattice's steps (what the pruned loss uses to
        choose its ranges), as constants.
      logit_lengths: optional int [B] frames, with label_lengths instead of
        boundary.
      label_lengths: optional int [B] symbols, with logit_lengths.

    Returns:
      loss, or (loss, (px_grad, py_grad)) with return_grad.
    """
    delay_penalty = _check_options(rnnt_type, reduction, delay_penalty)
    with tf.name_scope("rnnt_loss_simple"):
        boundary = _boundary_for_simple(boundary, logit_lengths, label_lengths, lm, am)
        lm, am = _simple_loss_inputs(lm, am, boundary)
        px, py = get_rnnt_logprobs(
            lm, am, symbols, termination_symbol, rnnt_type=rnnt_type, boundary=boundary
        )
        return _loss_from_logprobs(
            px, py, boundary, rnnt_type, delay_penalty, reduction, return_grad
        )


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
      symbols: int [B, S], values in [0, C).
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
    logits,
    symbols,
    termination_symbol,
    boundary,
    rnnt_type,
    delay_penalty,
    pruned=False,
):
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
    logprobs_fn: Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor]],
    logits: tf.Tensor,
    boundary: tf.Tensor | None,
    rnnt_type: str,
    delay_penalty: float,
    clamp: float,
    fastemit_lambda: float,
) -> tf.Tensor:
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
    logits: TensorLike,
    symbols: TensorLike,
    termination_symbol: int,
    boundary: TensorLike | None = None,
    rnnt_type: str = "regular",
    delay_penalty: float = 0.0,
    reduction: str = "mean",
    logit_lengths: TensorLike | None = None,
    label_lengths: TensorLike | None = None,
    clamp: float = -1.0,
    fastemit_lambda: float = 0.0,
) -> tf.Tensor:
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
      symbols: int [B, S], values in [0, C).
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
