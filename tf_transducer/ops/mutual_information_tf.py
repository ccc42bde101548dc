"""The MI recursion in plain TensorFlow: the reference and the XLA path.

Same maths as cc/kernels/mutual_information.h.  Cells (s, t) of the
(S + 1) x (T + 1) grid are laid out by diagonal k = t + r * s (r = 1 for
regular px, 0 for modified) so that one `tf.scan` step computes a whole
diagonal: both kinds of step raise k by one.  The forward scan gives alpha,
the backward scan beta (log-sum of paths from a cell to the end), and the
occupation of a step is exp(alpha + weight + beta_next - score).

It uses only TensorFlow ops that XLA compiles, so it runs inside
`tf.function(jit_compile=True)` where the custom op cannot.
"""

import tensorflow as tf

from tf_transducer.ops import _validation

_NEG_INF = float("-inf")


def _log_add(a, b):
    """log(exp(a) + exp(b)) elementwise, -inf when both are -inf."""
    hi = tf.maximum(a, b)
    safe = tf.where(tf.math.is_finite(hi), hi, tf.zeros_like(hi))
    return safe + tf.math.log(tf.exp(a - safe) + tf.exp(b - safe))


def _forward_backward(px, py, boundary):
    """Scores [B] and occupations px_grad, py_grad (shapes of px, py)."""
    dtype = px.dtype
    neg_inf = tf.constant(_NEG_INF, dtype)
    shape = tf.shape(py)
    batch, width, t_len = shape[0], shape[1], shape[2]
    s_len = width - 1
    t1 = tf.shape(px)[2]
    r = t1 - t_len  # 1: regular, 0: modified
    num_diag = t_len + r * s_len + 1

    # Grid coordinates of the skewed layout [K, W]: cell (k, s) is (s, t).
    k = tf.range(num_diag)[:, tf.newaxis]
    s = tf.range(width)[tf.newaxis, :]
    t = k - r * s

    def skew(x, rows, cols):
        """x [B, rows, cols] -> [B, K, W] with x[b, s, t] at (k, s), else -inf."""
        valid = (s < rows) & (t >= 0) & (t < cols)
        index = tf.where(valid, s * cols + t, tf.zeros_like(t))
        flat = tf.reshape(x, [batch, rows * cols])
        gathered = tf.gather(flat, tf.reshape(index, [-1]), axis=1)
        gathered = tf.reshape(gathered, [batch, num_diag, width])
        return tf.where(valid[tf.newaxis], gathered, neg_inf)

    bnd = tf.cast(boundary, tf.int32)
    s_begin, t_begin, s_end, t_end = (bnd[:, i, None, None] for i in range(4))
    inside = (s >= s_begin) & (s <= s_end) & (t >= t_begin) & (t <= t_end)
    start = (s == s_begin) & (t == t_begin)
    end = (s == s_end) & (t == t_end)

    # Weights of the steps that leave each cell; a step that leaves or
    # enters the rectangle is -inf, whatever px / py hold there (under XLA
    # nothing checks the values outside it).
    x_target_inside = tf.pad(inside[:, 1:, 1:], [[0, 0], [0, 1], [0, 1]])
    y_target_inside = tf.pad(inside[:, 1:, :], [[0, 0], [0, 1], [0, 0]])
    px_out = tf.where(inside & x_target_inside, skew(px, s_len, t1), neg_inf)
    py_out = tf.where(inside & y_target_inside, skew(py, width, t_len), neg_inf)

    def by_diagonal(x):
        return tf.transpose(x, [1, 0, 2])  # [B, K, W] -> [K, B, W]

    # Forward: the steps into diagonal k leave diagonal k - 1.
    neg_row = tf.fill([1, batch, width], neg_inf)
    px_in = tf.concat([neg_row, by_diagonal(px_out)[:-1]], axis=0)
    py_in = tf.concat([neg_row, by_diagonal(py_out)[:-1]], axis=0)

    def forward_step(a_prev, elems):
        wx, wy, is_inside, is_start = elems
        x_term = tf.pad(
            (a_prev + wx)[:, :-1], [[0, 0], [1, 0]], constant_values=_NEG_INF
        )
        a = _log_add(x_term, a_prev + wy)
        return tf.where(is_start, tf.zeros_like(a), tf.where(is_inside, a, neg_inf))

    alpha = tf.scan(
        forward_step,
        (px_in, py_in, by_diagonal(inside), by_diagonal(start)),
        initializer=tf.fill([batch, width], neg_inf),
    )  # [K, B, W]

    def backward_step(b_next, elems):
        wx, wy, is_inside, is_end = elems
        x_term = wx + tf.pad(b_next[:, 1:], [[0, 0], [0, 1]], constant_values=_NEG_INF)
        b = _log_add(x_term, wy + b_next)
        return tf.where(is_end, tf.zeros_like(b), tf.where(is_inside, b, neg_inf))

    beta = tf.scan(
        backward_step,
        (
            by_diagonal(px_out),
            by_diagonal(py_out),
            by_diagonal(inside),
            by_diagonal(end),
        ),
        initializer=tf.fill([batch, width], neg_inf),
        reverse=True,
    )  # [K, B, W]

    alpha = by_diagonal(alpha)  # back to [B, K, W]
    beta = by_diagonal(beta)
    scores = tf.reduce_max(tf.where(end, alpha, neg_inf), axis=[1, 2])

    beta_next = tf.concat([beta[:, 1:], tf.fill([batch, 1, width], neg_inf)], 1)
    beta_next_x = tf.pad(
        beta_next[:, :, 1:], [[0, 0], [0, 0], [0, 1]], constant_values=_NEG_INF
    )
    has_path = tf.math.is_finite(scores)[:, tf.newaxis, tf.newaxis]
    safe_scores = tf.where(has_path, scores[:, None, None], tf.zeros_like(alpha))

    def occupation(weights, after):
        # A probability: <= 1, also where rounding of large log-weights
        # (|values| ~ 1e10 in float32) says otherwise.
        occ = tf.exp(tf.minimum(alpha + weights + after - safe_scores, 0))
        return tf.where(has_path, occ, tf.zeros_like(occ))

    occ_x = tf.reshape(occupation(px_out, beta_next_x), [batch, -1])
    occ_y = tf.reshape(occupation(py_out, beta_next), [batch, -1])

    def unskew(occ, rows, cols):
        """[B, K * W] -> [B, rows, cols], entry (s, t) from cell (t + r s, s)."""
        rs = tf.range(rows)[:, tf.newaxis]
        ts = tf.range(cols)[tf.newaxis, :]
        index = tf.reshape((ts + r * rs) * width + rs, [-1])
        return tf.reshape(tf.gather(occ, index, axis=1), [batch, rows, cols])

    return scores, unskew(occ_x, s_len, t1), unskew(occ_y, width, t_len)


def mutual_information_recursion_tf(px, py, boundary=None, return_grad=False):
    """The MI recursion in pure TensorFlow, differentiable, XLA-compatible.

    Same arguments, results and errors as
    `tf_transducer.mutual_information_recursion`; slower, but it needs no
    compiled op.

    Args:
      px: float [B, S, T + 1] (regular) or [B, S, T] (modified).
      py: float [B, S + 1, T], the dtype of px.
      boundary: optional int [B, 4] rows (s_begin, t_begin, s_end, t_end).
      return_grad: also return (px_grad, py_grad), the gradient of
        sum(scores), as constants.

    Returns:
      scores [B], or (scores, (px_grad, py_grad)) with return_grad.
    """
    with tf.name_scope("mutual_information_recursion_tf"):
        px, py, boundary = _validation.prepare_inputs(px, py, boundary)
        with tf.control_dependencies(_validation.runtime_checks(px, py, boundary)):
            px = tf.identity(px)

        @tf.custom_gradient
        def recursion(px, py):
            scores, px_grad, py_grad = _forward_backward(px, py, boundary)

            def grad(d_scores, *unused):
                scale = d_scores[:, tf.newaxis, tf.newaxis]
                return px_grad * scale, py_grad * scale

            return (scores, px_grad, py_grad), grad

        scores, px_grad, py_grad = recursion(px, py)
        if return_grad:
            return scores, (tf.stop_gradient(px_grad), tf.stop_gradient(py_grad))
        return scores
