# SPDX-License-Identifier: Apache-2.0
"""The RNN-T and mutual-information ops' own argument checks.

The generic checks (`require`, `first_bad`, `integer_tensor`, ...) live in
`tf_transducer._checks`; these know the ops' arguments (px, py, boundary,
symbols, ranges, rnnt_type, ...). Static checks raise ValueError, value
checks raise InvalidArgumentError.
"""

from typing import Any

import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import after
from tf_transducer._checks import finite_or_neg_inf
from tf_transducer._checks import first_bad
from tf_transducer._checks import float_tensor
from tf_transducer._checks import in_xla_context
from tf_transducer._checks import integer_tensor
from tf_transducer._checks import real_number
from tf_transducer._checks import require

_FLOAT_DTYPES = (tf.float32, tf.float64)


def prepare_inputs(
    px: TensorLike, py: TensorLike, boundary: TensorLike | None
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Converts and checks the arguments of the MI recursion.

    Checks everything that is known while tracing (ranks, dtypes, static
    shapes) and raises ValueError naming the argument.  What only shows at run
    time (dynamic shapes, boundary values, NaN) is checked by the kernel or by
    `runtime_checks`.

    Returns:
      (px, py, boundary) as tensors; boundary is int64 [B, 4], filled with
      (0, 0, S, T) rows when None.
    """
    px = tf.convert_to_tensor(px, name="px")
    py = tf.convert_to_tensor(py, name="py")
    if px.dtype not in _FLOAT_DTYPES:
        raise ValueError(f"px must be float32 or float64, got {px.dtype.name}")
    if py.dtype != px.dtype:
        raise ValueError(
            f"py must have the dtype of px ({px.dtype.name}), got {py.dtype.name}"
        )
    if px.shape.rank != 3:
        raise ValueError(
            f"px must have rank 3 [B, S, T + 1] or [B, S, T], got shape {px.shape}"
        )
    if py.shape.rank != 3:
        raise ValueError(f"py must have rank 3 [B, S + 1, T], got shape {py.shape}")
    b, s, t1 = px.shape
    b_y, s1, t = py.shape
    if b is not None and b_y is not None and b != b_y:
        raise ValueError(
            f"px and py must have the same batch size, got px {px.shape} "
            f"and py {py.shape}"
        )
    if s is not None and s1 is not None and s1 != s + 1:
        raise ValueError(
            f"py must have S + 1 = {s + 1} rows to match px {px.shape}, "
            f"got py {py.shape}"
        )
    if t1 is not None and t is not None and t1 not in (t, t + 1):
        raise ValueError(
            f"px must have T + 1 = {t + 1} (regular) or T = {t} (modified) "
            f"columns to match py {py.shape}, got px {px.shape}"
        )
    # S = 0 (no symbols) is a lattice of blank steps alone.
    for name, value, shape in (("B", b, px.shape), ("T", t, py.shape)):
        if value == 0:
            raise ValueError(
                f"{name} must be positive, got {name} = 0 from shape {shape} "
                "(pass a boundary to express empty sequences)"
            )
    if boundary is None:
        shape = tf.shape(py, out_type=tf.int64)
        boundary = default_boundary(shape[0], shape[1] - 1, shape[2])
    else:
        boundary = tf.convert_to_tensor(boundary, name="boundary")
        if not boundary.dtype.is_integer:
            raise ValueError(
                f"boundary must be an integer tensor, got {boundary.dtype.name}"
            )
        boundary = tf.cast(boundary, tf.int64)
        if boundary.shape.rank != 2 or boundary.shape[1] not in (None, 4):
            raise ValueError(f"boundary must have shape [B, 4], got {boundary.shape}")
        if boundary.shape[0] is not None and b is not None and boundary.shape[0] != b:
            raise ValueError(
                f"boundary must have shape [B, 4] with B = {b} from px, "
                f"got {boundary.shape}"
            )
    return px, py, boundary


def default_boundary(
    batch: TensorLike, s_len: TensorLike, t_len: TensorLike
) -> tf.Tensor:
    """int64 [B, 4] rows (0, 0, S, T)."""
    zero = tf.constant(0, tf.int64)
    row = tf.stack([zero, zero, tf.cast(s_len, tf.int64), tf.cast(t_len, tf.int64)])
    return tf.tile(row[tf.newaxis], tf.stack([tf.cast(batch, tf.int32), 1]))


def runtime_checks(px: tf.Tensor, py: tf.Tensor, boundary: tf.Tensor) -> list[Any]:
    """Graph-side checks for the pure-TF path, matching the kernel's errors.

    Returns a list of assertion ops (no-ops under XLA, which ignores them).
    The shapes are checked first (while tracing only the ranks were known),
    then the boundary's values, then px and py's.
    """
    shape = tf.shape(py, out_type=tf.int64)
    s, t = shape[1] - 1, shape[2]
    if in_xla_context():
        return []
    px_shape = tf.shape(px, out_type=tf.int64)
    rows = tf.shape(boundary, out_type=tf.int64)[0]
    shape_checks = [
        require(
            tf.equal(px_shape[0], shape[0]),
            "px and py must have the same batch size, got px {} and py {}",
            px_shape,
            shape,
        ),
        require(
            tf.equal(px_shape[1] + 1, shape[1]),
            "py must have S + 1 rows to match px, got px {} and py {}",
            px_shape,
            shape,
        ),
        require(
            (px_shape[2] >= t) & (px_shape[2] <= t + 1),
            "px must have T + 1 (regular) or T (modified) columns to match py, "
            "got px {} and py {}",
            px_shape,
            shape,
        ),
        require(
            t > 0,
            "T must be positive, got px {} and py {} (pass a boundary to "
            "express empty sequences)",
            px_shape,
            shape,
        ),
        require(
            tf.equal(rows, shape[0]),
            "boundary must have shape [B, 4] with B = {} from px, got {} rows",
            shape[0],
            rows,
        ),
    ]
    with after(*shape_checks):
        boundary = tf.identity(boundary)
    s_begin, t_begin, s_end, t_end = (boundary[:, i] for i in range(4))
    ok = (
        (s_begin >= 0)
        & (s_begin <= s_end)
        & (s_end <= s)
        & (t_begin >= 0)
        & (t_begin <= t_end)
        & (t_end <= t)
    )
    row, _ = first_bad(~ok, boundary)
    checks = shape_checks + [
        require(
            tf.reduce_all(ok),
            "boundary rows must satisfy 0 <= s_begin <= s_end <= S = {} and "
            "0 <= t_begin <= t_end <= T = {}, got {}",
            s,
            t,
            row,
        )
    ]
    checks += [finite_or_neg_inf(px, "px"), finite_or_neg_inf(py, "py")]
    return [c for c in checks if c is not None]


# The RNN-T losses' arguments (tf_transducer.ops.rnnt and its siblings).

RNNT_TYPES = ("regular", "modified", "constrained")
REDUCTIONS = ("none", "mean", "sum")


def _check_options(rnnt_type, reduction="none", delay_penalty=0.0):
    """The Python options shared by the losses; returns delay_penalty."""
    if rnnt_type not in RNNT_TYPES:
        raise ValueError(f"rnnt_type must be one of {RNNT_TYPES}, got {rnnt_type!r}")
    if not isinstance(reduction, str) or reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    return real_number("delay_penalty", delay_penalty, minimum=0.0)


def _dim(x, axis):
    """x.shape[axis] when known, else the int64 scalar tensor."""
    static = x.shape[axis]
    return static if static is not None else tf.shape(x, out_type=tf.int64)[axis]


def _check_symbols(symbols, batch, num_symbols, num_classes):
    """symbols as int64 [B, S], checked against B, S and [0, C)."""
    symbols = integer_tensor(symbols, "symbols", 2, "[B, S]")
    for got, want in ((symbols.shape[0], batch), (symbols.shape[1], num_symbols)):
        if isinstance(got, int) and isinstance(want, int) and got != want:
            raise ValueError(
                f"symbols must have shape [B, S] = [{batch}, {num_symbols}], "
                f"got {symbols.shape}"
            )
    for got, want, what in (
        (_dim(symbols, 0), batch, "B"),
        (_dim(symbols, 1), num_symbols, "S"),
    ):
        if want is not None and not (isinstance(got, int) and isinstance(want, int)):
            require(
                tf.equal(tf.cast(got, tf.int64), tf.cast(want, tf.int64)),
                f"symbols must have {what} = {{}} entries to match, got {{}}",
                want,
                got,
            )
    if not in_xla_context():
        num_classes = tf.cast(num_classes, tf.int64)
        bad = (symbols < 0) | (symbols >= num_classes)
        value, index = first_bad(bad, symbols)
        require(
            ~tf.reduce_any(bad),
            "symbols must lie in [0, C) with C = {}; got {} at [b, s] = {} "
            "(labels padded with -1 need the padding replaced, or "
            "label_lengths)",
            num_classes,
            value,
            index,
        )
    return symbols


def _check_termination(termination_symbol, num_classes):
    if not isinstance(termination_symbol, int) or isinstance(termination_symbol, bool):
        raise ValueError(
            f"termination_symbol must be a Python int, got {termination_symbol!r}"
        )
    if termination_symbol < 0 or (
        isinstance(num_classes, int) and termination_symbol >= num_classes
    ):
        raise ValueError(
            f"termination_symbol must lie in [0, C) with C = {num_classes}, "
            f"got {termination_symbol}"
        )
    if num_classes is not None and not isinstance(num_classes, int):
        require(
            termination_symbol < num_classes,
            f"termination_symbol must lie in [0, C), got {termination_symbol} "
            "with C = {}",
            num_classes,
        )


def _check_frames(num_frames, num_symbols, rnnt_type):
    """modified / constrained lattices need T >= S."""
    if rnnt_type == "regular":
        return
    if isinstance(num_frames, int) and isinstance(num_symbols, int):
        if num_frames < num_symbols:
            raise ValueError(
                f"rnnt_type {rnnt_type!r} needs T >= S (one frame per symbol), "
                f"got T = {num_frames}, S = {num_symbols}"
            )
        return
    require(
        tf.cast(num_frames, tf.int64) >= tf.cast(num_symbols, tf.int64),
        f"rnnt_type {rnnt_type!r} needs T >= S (one frame per symbol), got "
        "T = {}, S = {}",
        num_frames,
        num_symbols,
    )


def _check_logits(logits, symbols, termination_symbol, rnnt_type, pruned=False):
    """Checked (logits, symbols) of the joint and pruned losses.

    logits [B, T, S + 1, C], or [B, T, s_range, C] when pruned (then S comes
    from symbols alone); symbols int64 [B, S] in [0, C).
    """
    rows = "s_range" if pruned else "S + 1"
    logits = float_tensor(logits, "logits", 4, f"[B, T, {rows}, C]")
    _check_termination(termination_symbol, _dim(logits, 3))
    s_len = None if pruned else _dim(logits, 2) - 1
    symbols = _check_symbols(symbols, _dim(logits, 0), s_len, _dim(logits, 3))
    _check_frames(_dim(logits, 1), _dim(symbols, 1), rnnt_type)
    return logits, symbols


def _check_ranges(ranges, batch=None, frames=None, num_symbols=None):
    """ranges as int64 [B, T, s_range]: consecutive positions in [0, S]."""
    ranges = integer_tensor(ranges, "ranges", 3, "[B, T, s_range]")
    if in_xla_context():
        return ranges
    for axis, want, what in ((0, batch, "B"), (1, frames, "T")):
        got = _dim(ranges, axis)
        if isinstance(got, int) and isinstance(want, int):
            if got != want:
                raise ValueError(
                    f"ranges must have shape [B, T, s_range] with {what} = {want}, "
                    f"got {ranges.shape}"
                )
        elif want is not None:
            require(
                tf.equal(tf.cast(got, tf.int64), tf.cast(want, tf.int64)),
                f"ranges must have {what} = {{}} to match, got {{}}",
                want,
                got,
            )
    if num_symbols is not None:
        s_len = tf.cast(num_symbols, tf.int64)
        steps = ranges[..., 1:] - ranges[..., :-1]
        bad_row = (
            (ranges[..., 0] < 0)
            | (ranges[..., -1] > s_len)
            | tf.reduce_any(steps != 1, axis=-1)
        )
        row, index = first_bad(bad_row, ranges)
        require(
            ~tf.reduce_any(bad_row),
            "ranges must hold consecutive symbol positions within [0, S = {}]; "
            "got {} at [b, t] = {}",
            s_len,
            row,
            index,
        )
    return ranges


def _check_boundary(boundary, batch=None):
    """boundary as int64 [B, 4] (values are checked where it is used).

    batch: the B of the other inputs (int, or a tensor when not known while
    tracing); None checks the shape alone.
    """
    boundary = integer_tensor(boundary, "boundary", 2, "[B, 4]")
    if boundary.shape[1] not in (None, 4) or (
        isinstance(batch, int) and boundary.shape[0] not in (None, batch)
    ):
        raise ValueError(
            f"boundary must have shape [B, 4] with B = {batch}, got {boundary.shape}"
        )
    if batch is None or (isinstance(batch, int) and boundary.shape[0] is not None):
        return boundary
    rows = tf.shape(boundary, out_type=tf.int64)[0]
    with after(
        require(
            tf.equal(rows, tf.cast(batch, tf.int64)),
            "boundary must have B = {} rows (one per sequence), got {}",
            batch,
            rows,
        )
    ):
        return tf.identity(boundary)


def _check_boundary_values(boundary, s_len, t_len):
    """0 <= s_begin <= s_end <= S and 0 <= t_begin <= t_end <= T in each row.

    Returns the check (for `after`), None eagerly or under XLA.
    """
    if in_xla_context():
        return None
    s_len, t_len = tf.cast(s_len, tf.int64), tf.cast(t_len, tf.int64)
    ok = (
        (boundary[:, 0] >= 0)
        & (boundary[:, 0] <= boundary[:, 2])
        & (boundary[:, 2] <= s_len)
        & (boundary[:, 1] >= 0)
        & (boundary[:, 1] <= boundary[:, 3])
        & (boundary[:, 3] <= t_len)
    )
    row, index = first_bad(~ok, boundary)
    return require(
        tf.reduce_all(ok),
        "boundary rows must satisfy 0 <= s_begin <= s_end <= S = {} and "
        "0 <= t_begin <= t_end <= T = {}; got {} at row {}",
        s_len,
        t_len,
        row,
        index,
    )
