# SPDX-License-Identifier: Apache-2.0
"""Pruned RNN-T (k2 / fast_rnnt): prune ranges, pruned log-probs, fused loss.

The prune ranges come from the simple loss's occupations; the log-probs are
the pruned joiner's.

The lattices, rnnt_type and delay_penalty are as in `tf_transducer.ops.rnnt`.
"""

import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import after
from tf_transducer._checks import clamp_value
from tf_transducer._checks import finite_or_neg_inf
from tf_transducer._checks import float_tensor
from tf_transducer._checks import in_xla_context
from tf_transducer._checks import real_number
from tf_transducer._checks import require
from tf_transducer.ops import _loader
from tf_transducer.ops._validation import _check_boundary
from tf_transducer.ops._validation import _check_boundary_values
from tf_transducer.ops._validation import _check_logits
from tf_transducer.ops._validation import _check_options
from tf_transducer.ops._validation import _check_ranges
from tf_transducer.ops._validation import _dim
from tf_transducer.ops.rnnt import _composite_scores
from tf_transducer.ops.rnnt import _fused_op_inputs
from tf_transducer.ops.rnnt import _gradient_attrs
from tf_transducer.ops.rnnt_lattice import _NEG_INF
from tf_transducer.ops.rnnt_lattice import _finish_logprobs
from tf_transducer.ops.rnnt_lattice import _mi_dtype
from tf_transducer.ops.rnnt_lattice import _reduce


def _monotonic_lower_bound(x: tf.Tensor) -> tf.Tensor:
    """The largest non-decreasing sequence <= x along the last axis.

    y[..., i] = min(x[..., i:]), in log2(n) doubling steps (TF has no cummin):
    after the step with shift k, y[i] is the minimum of x[i : i + 2k]. The
    look-ahead index is clipped to n - 1 (x[n - 1] belongs to every suffix),
    which keeps shapes static for XLA.
    """
    n = tf.shape(x)[-1]
    index = tf.range(n)

    def body(shift, y):
        ahead = tf.gather(y, tf.minimum(index + shift, n - 1), axis=-1)
        return shift * 2, tf.minimum(y, ahead)

    _, y = tf.while_loop(lambda shift, _: shift < n, body, (tf.constant(1), x))
    return y


def _adjust_pruning_lower_bound(s_begin: tf.Tensor, s_range: TensorLike) -> tf.Tensor:
    """Makes s_begin [B, T] non-decreasing, start at 0 and step by < s_range.

    With r = s_range - 1, s_begin[t + 1] - s_begin[t] <= r holds exactly when
    s_begin[t] - r t is non-increasing, i.e. r t - s_begin[t] non-decreasing:
    so the monotonic lower bound is taken of that, clamped at 0 (the first
    frame starts at symbol 0) and mapped back.
    """
    s_begin = _monotonic_lower_bound(s_begin)
    ramp = (s_range - 1) * tf.range(tf.shape(s_begin)[1], dtype=s_begin.dtype)
    flipped = _monotonic_lower_bound(ramp - s_begin)
    return ramp - tf.maximum(flipped, 0)


def get_rnnt_prune_ranges(
    px_grad: TensorLike, py_grad: TensorLike, boundary: TensorLike, s_range: int
) -> tf.Tensor:
    """The s_range symbols to keep at each frame, from the simple loss.

    For each frame t, ranges[b, t] = s_begin[b, t] + [0, s_range), where
    s_begin maximises the occupation of the window (blank steps inside it
    minus the symbol step into it), then is made non-decreasing, starting at
    0, stepping by less than s_range (by at most 1 for modified / constrained
    px), and ending at s_end - s_range + 1 on the last frames.

    Args:
      px_grad: float [B, S, T + 1] or [B, S, T], from
        `rnnt_loss_simple(..., return_grad=True)`.
      py_grad: float [B, S + 1, T].
      boundary: int [B, 4] rows (s_begin, t_begin, s_end, t_end).
      s_range: int, symbols kept per frame: >= 2 for regular px, >= 1
        otherwise; values above S act as S + 1.

    Returns:
      int64 [B, T, s_range].
    """
    with tf.name_scope("get_rnnt_prune_ranges"):
        px_grad = float_tensor(px_grad, "px_grad", 3, "[B, S, T + 1] or [B, S, T]")
        py_grad = float_tensor(py_grad, "py_grad", 3, "[B, S + 1, T]")
        batch, s_len = _dim(py_grad, 0), _dim(py_grad, 1) - 1
        t_len, t1 = _dim(py_grad, 2), _dim(px_grad, 2)
        for got, want, what in (
            (_dim(px_grad, 0), batch, "B"),
            (_dim(px_grad, 1), s_len, "S"),
        ):
            if isinstance(got, int) and isinstance(want, int):
                if got != want:
                    raise ValueError(
                        f"px_grad {px_grad.shape} and py_grad {py_grad.shape} must "
                        f"agree in {what} (px_grad [B, S, T (+ 1)], py_grad "
                        "[B, S + 1, T])"
                    )
            else:
                require(
                    tf.equal(tf.cast(got, tf.int64), tf.cast(want, tf.int64)),
                    f"px_grad and py_grad must agree in {what}, got px_grad "
                    "{} and py_grad {}",
                    tf.shape(px_grad),
                    tf.shape(py_grad),
                )
        if not isinstance(s_range, int) or isinstance(s_range, bool) or s_range < 1:
            raise ValueError(f"s_range must be an int >= 1, got {s_range!r}")
        if isinstance(t1, int) and isinstance(t_len, int):
            if t1 not in (t_len, t_len + 1):
                raise ValueError(
                    f"px_grad must have T + 1 = {t_len + 1} (regular) or T = "
                    f"{t_len} (modified) columns, got {px_grad.shape}"
                )
            modified = t1 == t_len
            if not modified and s_range < 2:
                raise ValueError(
                    f"s_range must be an int >= 2 for regular px, got {s_range!r}"
                )
        else:
            modified = tf.equal(t1, t_len)
            require(
                modified | tf.equal(t1, t_len + 1),
                "px_grad must have T or T + 1 columns for py_grad's T = {}, got {}",
                t_len,
                t1,
            )
            require(
                modified | (s_range >= 2),
                f"s_range must be >= 2 for regular px, got {s_range}",
            )
        # Values above S + 1 act as S + 1 (every symbol is kept).
        if isinstance(s_len, int):
            s_range = min(s_range, s_len + 1)
        else:
            s_range = tf.minimum(tf.constant(s_range, tf.int64), s_len + 1)
        boundary = _check_boundary(boundary, batch)
        with after(
            _check_boundary_values(boundary, s_len, t_len),
            finite_or_neg_inf(px_grad, "px_grad", neg_inf=False),
            finite_or_neg_inf(py_grad, "py_grad", neg_inf=False),
        ):
            px_grad, py_grad = tf.identity(px_grad), tf.identity(py_grad)
        # Occupation of the blank steps in each window of s_range rows.
        # (A gather, not tf.signal.frame, whose sizes XLA cannot resolve
        # when S is only known at run time.)
        rows = tf.range(s_len + 2 - s_range)[:, tf.newaxis] + tf.range(s_range)
        windows = tf.gather(py_grad, rows, axis=1)  # [B, W, s_range, T]
        window_sum = tf.reduce_sum(windows, axis=2)
        px_pad = tf.pad(px_grad, [[0, 0], [1, 0], [0, 0]])[
            :, : s_len + 2 - s_range, :t_len
        ]
        score = window_sum - px_pad  # [B, S + 2 - s_range, T]
        # argmax over windows, the first on a tie.
        best = tf.reduce_max(score, axis=1, keepdims=True)
        index = tf.range(tf.shape(score, out_type=tf.int64)[1])[
            tf.newaxis, :, tf.newaxis
        ]
        s_begin = tf.reduce_min(
            tf.where(score == best, index, tf.int64.max), axis=1
        )  # [B, T]
        t = tf.range(t_len, dtype=tf.int64)[tf.newaxis]
        last = tf.maximum(boundary[:, 2:3] - s_range + 1, 0)
        s_begin = tf.where(t < boundary[:, 3:4] - 1, s_begin, last)
        if isinstance(modified, bool):
            step = 2 if modified else s_range
        else:
            step = tf.where(modified, tf.constant(2, tf.int64), s_range)
        s_begin = _adjust_pruning_lower_bound(s_begin, step)
        return s_begin[..., tf.newaxis] + tf.range(s_range, dtype=tf.int64)


def do_rnnt_pruning(
    am: TensorLike, lm: TensorLike, ranges: TensorLike
) -> tuple[tf.Tensor, tf.Tensor]:
    """The encoder and prediction outputs at the kept (frame, symbol) pairs.

    Args:
      am: float [B, T, C], encoder output.
      lm: float [B, S + 1, C], prediction-network output.
      ranges: int [B, T, s_range] from `get_rnnt_prune_ranges`.

    Returns:
      (am_pruned, lm_pruned), both [B, T, s_range, C]; a joiner applied to
      them gives the logits of `rnnt_loss_pruned`.
    """
    with tf.name_scope("do_rnnt_pruning"):
        am = tf.convert_to_tensor(am, name="am")
        lm = tf.convert_to_tensor(lm, name="lm")
        if am.shape.rank != 3 or lm.shape.rank != 3:
            raise ValueError(
                f"am [B, T, C] and lm [B, S + 1, C] must have rank 3, got "
                f"{am.shape} and {lm.shape}"
            )
        checks = []
        for axis, what in ((0, "B"), (2, "C")):
            if None not in (am.shape[axis], lm.shape[axis]):
                if am.shape[axis] != lm.shape[axis]:
                    raise ValueError(
                        f"am {am.shape} and lm {lm.shape} must agree in {what}"
                    )
            elif not in_xla_context():
                checks.append(
                    require(
                        tf.equal(tf.shape(am)[axis], tf.shape(lm)[axis]),
                        f"am and lm must agree in {what}, got am {{}} and lm {{}}",
                        tf.shape(am),
                        tf.shape(lm),
                    )
                )
        with after(*checks):
            ranges = _check_ranges(ranges, _dim(am, 0), _dim(am, 1), _dim(lm, 1) - 1)
        if _pruning_op_applies(am, lm):
            return _prune_with_op_gradient(am, lm, ranges)
        return _prune(am, lm, ranges)


def _prune(am: tf.Tensor, lm: tf.Tensor, ranges: tf.Tensor):
    """(am_pruned, lm_pruned) [B, T, s_range, C] by TensorFlow ops."""
    lm_pruned = tf.gather(lm, ranges, axis=1, batch_dims=1)
    # expand_dims, not am[:, :, tf.newaxis]: a reshape's gradient is free.
    am_pruned = tf.broadcast_to(tf.expand_dims(am, 2), tf.shape(lm_pruned))
    return am_pruned, lm_pruned


def _pruning_op_applies(am: tf.Tensor, lm: tf.Tensor) -> bool:
    """Whether do_rnnt_pruning's gradient can be the CPU op's.

    Not under XLA (no custom ops), not with a GPU visible (the op has no GPU
    kernel: TensorFlow's gradient stays on the device), and for one float
    type shared by am and lm.
    """
    return (
        am.dtype == lm.dtype
        and am.dtype in (tf.float16, tf.bfloat16, tf.float32, tf.float64)
        and not in_xla_context()
        and not _loader.gpu_visible()
    )


@tf.custom_gradient
def _prune_with_op_gradient(am, lm, ranges):
    """_prune with TfTransducerRnntPruningGrad as its gradient.

    One pass, instead of TensorFlow's reduction over a middle axis and its
    row-by-row scatter.
    """
    pruned = _prune(am, lm, ranges)

    def grad(d_am_pruned, d_lm_pruned):
        d_am_pruned = tf.zeros_like(pruned[0]) if d_am_pruned is None else d_am_pruned
        d_lm_pruned = tf.zeros_like(pruned[1]) if d_lm_pruned is None else d_lm_pruned
        d_am, d_lm = _loader.op_library().tf_transducer_rnnt_pruning_grad(
            d_am_pruned,
            d_lm_pruned,
            ranges,
            tf.shape(lm, out_type=tf.int64)[1],
        )
        return d_am, d_lm, None

    return pruned, grad


def _unprune(values: tf.Tensor, begin: tf.Tensor, width: TensorLike) -> tf.Tensor:
    """[B, T, s_range, ...] at s = begin + j -> [B, T, width, ...], -inf elsewhere."""
    s_range = tf.shape(values, out_type=tf.int64)[2]
    j = tf.range(width, dtype=tf.int64)[tf.newaxis, tf.newaxis] - begin[..., tf.newaxis]
    inside = (j >= 0) & (j < s_range)
    picked = tf.gather(
        values, tf.clip_by_value(j, 0, s_range - 1), axis=2, batch_dims=2
    )
    for _ in range(values.shape.rank - 3):  # trailing dimensions
        inside = inside[..., tf.newaxis]
    return tf.where(inside, picked, tf.cast(_NEG_INF, values.dtype))


def get_rnnt_logprobs_pruned(
    logits: TensorLike, symbols: TensorLike, ranges: TensorLike,
    termination_symbol: int, boundary: TensorLike | None, rnnt_type: str = "regular",
) -> tuple[tf.Tensor, tf.Tensor]:  # fmt: skip
    """px, py from the logits of a pruned joiner.

    Args:
      logits: float [B, T, s_range, C]: the joiner at (t, ranges[b, t, j]).
      symbols: int [B, S], values in [0, C).
      ranges: int [B, T, s_range] from `get_rnnt_prune_ranges`.
      termination_symbol: int in [0, C), the blank.
      boundary: int [B, 4] rows (s_begin, t_begin, s_end, t_end), or None.
      rnnt_type: "regular", "modified" or "constrained".

    Returns:
      px: [B, S, T + 1] (regular) or [B, S, T]; py: [B, S + 1, T]; -inf at the
      pruned-away (frame, symbol) pairs.
    """
    _check_options(rnnt_type)
    with tf.name_scope("get_rnnt_logprobs_pruned"):
        logits, symbols = _check_logits(
            logits, symbols, termination_symbol, rnnt_type, pruned=True
        )
        logits = _mi_dtype(logits)
        ranges = _check_ranges(
            ranges, _dim(logits, 0), _dim(logits, 1), _dim(symbols, 1)
        )
        s_len = tf.shape(symbols, out_type=tf.int64)[1]
        normalizers = tf.reduce_logsumexp(logits, axis=3)  # [B, T, s_range]
        blank = tf.fill(
            [tf.shape(symbols)[0], 1], tf.constant(termination_symbol, tf.int64)
        )
        with_blank = tf.concat([symbols, blank], axis=1)  # [B, S + 1]
        pruned_symbols = tf.gather(with_blank, ranges, axis=1, batch_dims=1)
        px = tf.gather(logits, pruned_symbols[..., tf.newaxis], axis=3, batch_dims=3)
        px = px[..., 0] - normalizers
        begin = ranges[:, :, 0]
        px = tf.transpose(_unprune(px, begin, s_len), [0, 2, 1])  # [B, S, T]
        if rnnt_type == "regular":
            px = tf.pad(px, [[0, 0], [0, 0], [0, 1]], constant_values=_NEG_INF)
        py = logits[..., termination_symbol] - normalizers
        py = tf.transpose(_unprune(py, begin, s_len + 1), [0, 2, 1])  # [B, S + 1, T]
        return _finish_logprobs(px, py, boundary, rnnt_type)


def rnnt_loss_pruned(
    logits: TensorLike, symbols: TensorLike, ranges: TensorLike,
    termination_symbol: int, boundary: TensorLike | None = None,
    rnnt_type: str = "regular", delay_penalty: float = 0.0, reduction: str = "mean",
    clamp: float = -1.0, fastemit_lambda: float = 0.0,
) -> tf.Tensor:  # fmt: skip
    """The RNN-T loss on a pruned joiner's logits [B, T, s_range, C], fused.

    A C++ op as for `rnnt_loss` (the pruned-away (frame, symbol) pairs are
    excluded); under XLA, `get_rnnt_logprobs_pruned` and the pure-TF
    recursion.

    Args:
      logits: float [B, T, s_range, C]: the joiner at (t, ranges[b, t, j]).
      symbols: int [B, S], values in [0, C).
      ranges: int [B, T, s_range] from `get_rnnt_prune_ranges`.
      termination_symbol: int in [0, C), the blank.
      boundary: optional int [B, 4] rows (s_begin, t_begin, s_end, t_end).
      rnnt_type: "regular", "modified" or "constrained".
      delay_penalty: float >= 0, see the module docstring.
      reduction: "none" ([B] losses), "mean" or "sum" (scalars).
      clamp: as `rnnt_loss` (on the pruned logits).
      fastemit_lambda: as `rnnt_loss` (on the pruned logits).

    Returns:
      The loss: [B] with reduction "none", else a scalar.
    """
    delay_penalty = _check_options(rnnt_type, reduction, delay_penalty)
    clamp = clamp_value(clamp)
    fastemit_lambda = real_number("fastemit_lambda", fastemit_lambda, minimum=0.0)
    with tf.name_scope("rnnt_loss_pruned"):
        xla = in_xla_context()
        _loader.note_cpu_or_xla_path(xla)
        if xla:
            logits = tf.convert_to_tensor(logits, name="logits")
            scores = _composite_scores(
                lambda x: get_rnnt_logprobs_pruned(
                    x, symbols, ranges, termination_symbol, boundary, rnnt_type
                ),
                logits, boundary, rnnt_type, delay_penalty, clamp, fastemit_lambda,
            )  # fmt: skip
            return _reduce(scores, reduction)
        logits, symbols, boundary, penalty = _fused_op_inputs(
            logits,
            symbols,
            termination_symbol,
            boundary,
            rnnt_type,
            delay_penalty,
            pruned=True,
        )
        ranges = _check_ranges(
            ranges, _dim(logits, 0), _dim(logits, 1), _dim(symbols, 1)
        )
        scores, *_ = _loader.op_library().tf_transducer_rnnt_loss_pruned(
            logits=logits,
            symbols=symbols,
            ranges=ranges,
            boundary=boundary,
            delay_penalty=penalty,
            termination_symbol=termination_symbol,
            rnnt_type=rnnt_type,
            clamp=float(clamp),
            fastemit_lambda=float(fastemit_lambda),
        )
        return _reduce(scores, reduction)


@tf.RegisterGradient("TfTransducerRnntLossPruned")
def _rnnt_loss_pruned_grad(op, d_scores, *unused_d_statistics):
    """As _rnnt_loss_grad, for pruned logits."""
    logits, symbols, ranges = op.inputs[0], op.inputs[1], op.inputs[2]
    _, px_grad, py_grad, normalizers = op.outputs
    d_logits = _loader.op_library().tf_transducer_rnnt_loss_pruned_grad(
        logits=logits,
        symbols=symbols,
        ranges=ranges,
        px_grad=px_grad,
        py_grad=py_grad,
        normalizers=normalizers,
        scale=d_scores,
        **_gradient_attrs(op),
    )
    return [d_logits, None, None, None, None]
