"""Argument checks shared by the custom-op and pure-TensorFlow MI paths."""

import tensorflow as tf

_FLOAT_DTYPES = (tf.float32, tf.float64)


def prepare_inputs(px, py, boundary):
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
    for name, value, shape in (
        ("B", b, px.shape),
        ("S", s, px.shape),
        ("T", t, py.shape),
    ):
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


def default_boundary(batch, s_len, t_len):
    """int64 [B, 4] rows (0, 0, S, T)."""
    zero = tf.constant(0, tf.int64)
    row = tf.stack([zero, zero, tf.cast(s_len, tf.int64), tf.cast(t_len, tf.int64)])
    return tf.tile(row[tf.newaxis], tf.stack([tf.cast(batch, tf.int32), 1]))


def runtime_checks(px, py, boundary):
    """Graph-side checks for the pure-TF path, matching the kernel's errors.

    Returns a list of assertion ops (no-ops under XLA, which ignores them).
    """
    shape = tf.shape(py, out_type=tf.int64)
    s, t = shape[1] - 1, shape[2]
    s_begin, t_begin, s_end, t_end = tf.unstack(boundary, axis=1)
    ok = (
        (s_begin >= 0)
        & (s_begin <= s_end)
        & (s_end <= s)
        & (t_begin >= 0)
        & (t_begin <= t_end)
        & (t_end <= t)
    )
    checks = [
        tf.debugging.Assert(
            tf.reduce_all(ok),
            [
                "boundary rows must satisfy 0 <= s_begin <= s_end <= S and "
                "0 <= t_begin <= t_end <= T; S, T, boundary =",
                s,
                t,
                boundary,
            ],
            summarize=64,
        )
    ]
    for name, x in (("px", px), ("py", py)):
        legal = tf.math.is_finite(x) | tf.equal(x, -float("inf"))
        checks.append(
            tf.debugging.Assert(
                tf.reduce_all(legal),
                [
                    f"{name} must be finite or -inf; first bad index:",
                    tf.where(~legal)[:1],
                ],
            )
        )
    return checks
