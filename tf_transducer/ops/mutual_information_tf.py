# SPDX-License-Identifier: Apache-2.0
"""The MI recursion in plain TensorFlow: the reference and the XLA path.

Same maths as cc/kernels/mutual_information.h.  Cells (s, t) of the
(S + 1) x (T + 1) grid are laid out by diagonal k = t + r * s (r = 1 for
regular px, 0 for modified) so that one `tf.scan` step computes a whole
diagonal: both kinds of step raise k by one.  The forward scan gives alpha;
the backward scan gives the occupation of every step from the share of
each cell's alpha that each incoming step brought, as the kernel does.

It uses only TensorFlow ops that XLA compiles, so it runs inside
`tf.function(jit_compile=True)` where the custom op cannot.
"""

import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer.ops import _validation

_NEG_INF = float("-inf")


def _log_add(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    """log(exp(a) + exp(b)) elementwise, -inf when both are -inf."""
    hi = tf.maximum(a, b)
    safe = tf.where(tf.math.is_finite(hi), hi, tf.zeros_like(hi))
    return safe + tf.math.log(tf.exp(a - safe) + tf.exp(b - safe))


def _forward_backward(
    px: tf.Tensor, py: tf.Tensor, boundary: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
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
        """x [B, rows, cols] -> [B, K, W] with x[b, s, t] at (k, s), else -inf.

        The cells outside x read a -inf appended to it (x may be empty: px
        for S = 0).
        """
        valid = (s < rows) & (t >= 0) & (t < cols)
        index = tf.where(valid, s * cols + t, rows * cols)
        flat = tf.reshape(x, [batch, rows * cols])
        flat = tf.pad(flat, [[0, 0], [0, 1]], constant_values=_NEG_INF)
        gathered = tf.gather(flat, tf.reshape(index, [-1]), axis=1)
        return tf.reshape(gathered, [batch, num_diag, width])

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

    # Backward, in probability space as the kernel does: the occupation g of
    # a cell is what its successors pass back, each in proportion to the
    # share of its forward score that came through that step,
    # wx = exp(x_in) / (exp(x_in) + exp(y_in)) and wy = 1 - wx. These local
    # shares stay exact where alpha + beta - score would cancel
    # catastrophically (log-weights of 1e10 in float32).
    alpha_prev = tf.concat([tf.fill([1, batch, width], neg_inf), alpha[:-1]], 0)
    x_in = tf.pad(
        (alpha_prev + px_in)[..., :-1],
        [[0, 0], [0, 0], [1, 0]],
        constant_values=_NEG_INF,
    )
    y_in = alpha_prev + py_in
    reached = (alpha > neg_inf) & by_diagonal(inside) & ~by_diagonal(start)
    hi = tf.maximum(x_in, y_in)
    finite_hi = tf.where(reached & tf.math.is_finite(hi), hi, tf.zeros_like(hi))
    ex = tf.exp(tf.minimum(x_in - finite_hi, 0))
    ey = tf.exp(tf.minimum(y_in - finite_hi, 0))
    total = tf.where(reached, ex + ey, tf.ones_like(ex))
    zero_row = tf.zeros([1, batch, width], dtype)

    def share(e):  # [K, B, W] of the cells, moved to their predecessors' k
        ratio = e / total  # NaN only after an overflow to +inf: no gradient
        ratio = tf.where(reached & tf.math.is_finite(ratio), ratio, 0)
        return tf.concat([ratio[1:], zero_row], axis=0)

    wx_next, wy_next = share(ex), share(ey)
    scores = tf.reduce_max(tf.where(end, by_diagonal(alpha), neg_inf), axis=[1, 2])
    has_path = tf.math.is_finite(scores)[:, tf.newaxis]
    end_value = tf.cast(has_path, dtype)

    def backward_step(carry, elems):
        g_next = carry[0]
        wx, wy, is_inside, is_end = elems
        occ_x = tf.pad((g_next * wx)[:, 1:], [[0, 0], [0, 1]])
        occ_y = g_next * wy
        g = tf.where(is_inside, occ_x + occ_y, tf.zeros_like(occ_x))
        g = tf.where(is_end, end_value + tf.zeros_like(g), g)
        return g, occ_x, occ_y

    zeros = tf.zeros([batch, width], dtype)
    _, occ_x, occ_y = tf.scan(
        backward_step,
        (wx_next, wy_next, by_diagonal(inside), by_diagonal(end)),
        initializer=(zeros, zeros, zeros),
        reverse=True,
    )  # [K, B, W] each: the occupations of the steps leaving each cell
    occ_x = tf.reshape(by_diagonal(occ_x), [batch, -1])
    occ_y = tf.reshape(by_diagonal(occ_y), [batch, -1])

    def unskew(occ, rows, cols):
        """[B, K * W] -> [B, rows, cols], entry (s, t) from cell (t + r s, s)."""
        rs = tf.range(rows)[:, tf.newaxis]
        ts = tf.range(cols)[tf.newaxis, :]
        index = tf.reshape((ts + r * rs) * width + rs, [-1])
        return tf.reshape(tf.gather(occ, index, axis=1), [batch, rows, cols])

    return scores, unskew(occ_x, s_len, t1), unskew(occ_y, width, t_len)


def mutual_information_recursion_tf(
    px: TensorLike,
    py: TensorLike,
    boundary: TensorLike | None = None,
    return_grad: bool = False,
) -> tf.Tensor | tuple[tf.Tensor, tuple[tf.Tensor, tf.Tensor]]:
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
        # Everything computed from the inputs runs after the checks.
        with tf.control_dependencies(_validation.runtime_checks(px, py, boundary)):
            px, py, boundary = tf.identity(px), tf.identity(py), tf.identity(boundary)

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
