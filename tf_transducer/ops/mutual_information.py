# SPDX-License-Identifier: Apache-2.0
"""The mutual-information recursion as a TensorFlow op (k2 / fast_rnnt).

The recursion, for each sequence b, over a grid of (S + 1) x (T + 1) cells:

    p[s_begin, t_begin] = 0
    regular  (px [B, S, T + 1]):
      p[s, t] = log_add(p[s - 1, t] + px[s - 1, t],  p[s, t - 1] + py[s, t - 1])
    modified (px [B, S, T]):
      p[s, t] = log_add(p[s - 1, t - 1] + px[s - 1, t - 1],
                        p[s, t - 1] + py[s, t - 1])

with terms from outside the boundary rectangle taken as -inf; the score is
p[s_end, t_end].  The C++ kernel (cc/kernels/mutual_information.h) computes
the score and, in the same call, the occupation probability of every step,
which is the gradient of sum(scores); the registered gradient only scales it.
"""

import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import in_xla_context
from tf_transducer.ops import _loader
from tf_transducer.ops import _validation
from tf_transducer.ops.mutual_information_tf import mutual_information_recursion_tf

_OP_NAME = "TfTransducerMutualInformation"


@tf.RegisterGradient(_OP_NAME)
def _mutual_information_grad(op, d_scores, unused_d_px_grad, unused_d_py_grad):
    """Scales the occupations the forward op already computed."""
    scale = d_scores[:, tf.newaxis, tf.newaxis]
    return [op.outputs[1] * scale, op.outputs[2] * scale, None]


def mutual_information_recursion(
    px: TensorLike,
    py: TensorLike,
    boundary: TensorLike | None = None,
    return_grad: bool = False,
) -> tf.Tensor | tuple[tf.Tensor, tuple[tf.Tensor, tf.Tensor]]:
    """Log-sum over all monotonic alignment paths of two sequences.

    A path moves from cell (s_begin, t_begin) to (s_end, t_end) of an
    (S + 1) x (T + 1) grid by x-steps (weight px) and y-steps (weight py); the
    score is the log of the summed exp-weights of all paths.  An x-step goes
    from (s, t) to (s + 1, t) when px has T + 1 columns ("regular") and to
    (s + 1, t + 1) when it has T columns ("modified", one symbol per frame);
    a y-step goes from (s, t) to (s, t + 1).  -inf weights exclude steps.

    Runs the C++ kernel; inside an XLA-compiled function (which cannot run
    custom ops, e.g. Keras `jit_compile=True`) it runs the equivalent pure-TF
    code instead.  Differentiable with respect to px and py.

    Args:
      px: float32 or float64 [B, S, T + 1] (regular) or [B, S, T] (modified).
      py: [B, S + 1, T], the dtype of px.
      boundary: optional integer [B, 4], rows (s_begin, t_begin, s_end, t_end)
        with 0 <= s_begin <= s_end <= S and 0 <= t_begin <= t_end <= T;
        defaults to (0, 0, S, T).  Empty sequences are expressed here
        (s_begin == s_end or t_begin == t_end): T itself must be positive.
        S may be 0 (px [B, 0, T (+ 1)]): a lattice of y-steps alone.
      return_grad: also return the gradient of sum(scores) with respect to px
        and py, i.e. the occupation probability of every step.  They are
        returned as constants (no second-order gradient).

    Returns:
      scores: [B], or (scores, (px_grad, py_grad)) when return_grad is True,
      with px_grad shaped like px and py_grad like py.

    Raises:
      ValueError: wrong ranks, dtypes or (static) shapes, naming the argument.
      tf.errors.InvalidArgumentError: at run time, for shapes only known
        then, a boundary row out of range, or NaN / +inf in px or py.

    Example:
    >>> px = tf.zeros([1, 2, 3])   # S = 2, T = 2, regular
    >>> py = tf.zeros([1, 3, 2])
    >>> float(tf.exp(mutual_information_recursion(px, py))[0])  # C(4, 2) paths
    6.0
    """
    xla = in_xla_context()
    _loader.note_cpu_or_xla_path(xla)
    if xla:
        return mutual_information_recursion_tf(px, py, boundary, return_grad)
    with tf.name_scope("mutual_information_recursion"):
        px, py, boundary = _validation.prepare_inputs(px, py, boundary)
        scores, px_grad, py_grad = (
            _loader.op_library().tf_transducer_mutual_information(
                px=px, py=py, boundary=boundary
            )
        )
        if return_grad:
            return scores, (tf.stop_gradient(px_grad), tf.stop_gradient(py_grad))
        return scores
