# SPDX-License-Identifier: Apache-2.0
"""The TDT lattice of token log-probs, which the simple and joint losses share.

`tdt_loss` reads token logits; the losses that never form them (the simple
loss of a trivial joiner, the loss fused with the joint network) have the
token log-probs of every lattice node instead, in the layout of
`get_rnnt_logprobs(rnnt_type="modified")`: px [B, S, T], the label y_u at
node (t, u), and py [B, S + 1, T], the blank. `tdt_lattice_scores` runs the
TDT lattice on them and the duration logits (one C++ op,
`TfTransducerTdtLattice`; its pure-TF twin under XLA).
"""

from collections.abc import Sequence

import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import in_xla_context
from tf_transducer.ops import _loader
from tf_transducer.ops.tdt_tf import tdt_node_log_probs
from tf_transducer.ops.tdt_tf import tdt_scores_of_log_probs


@tf.RegisterGradient("TfTransducerTdtLattice")
def _tdt_lattice_grad(op, d_scores, *unused_d_statistics):
    """px and py take their steps' occupations (FastEmit: px's scaled)."""
    _, px_grad, py_grad, duration_grad = op.outputs
    emit = 1.0 + op.get_attr("fastemit_lambda")
    scale = d_scores[:, tf.newaxis, tf.newaxis]
    return [
        emit * px_grad * scale,
        py_grad * scale,
        duration_grad * scale[..., tf.newaxis],
        None,
        None,
    ]


def tdt_lattice_scores(
    px: TensorLike, py: TensorLike, duration_logits: TensorLike,
    durations: Sequence[int], logit_lengths: tf.Tensor, label_lengths: tf.Tensor,
    *, sigma: float = 0.0, clamp: float = -1.0, fastemit_lambda: float = 0.0,
    return_grad: bool = False,
) -> tf.Tensor | tuple[tf.Tensor, tuple[tf.Tensor, tf.Tensor, tf.Tensor]]:  # fmt: skip
    """log P(y | x) [B] of the TDT lattice of token log-probs, differentiable.

    Nothing is checked here: the losses that call it check their inputs.

    Args:
      px: float32 or float64 [B, S, T], log-prob of the label y_u at (t, u).
      py: [B, S + 1, T], log-prob of the blank at (t, u), px's dtype.
      duration_logits: [B, T, S + 1, K], px's dtype, log-softmaxed here.
      durations: the K durations (checked: `check_durations`).
      logit_lengths: int64 [B] frames, in [1, T].
      label_lengths: int64 [B] symbols, in [0, S].
      sigma: subtracted from px and py.
      clamp: if > 0, each element of the duration logits' gradient is
        clamped to [-clamp, clamp] (px and py take their occupations).
      fastemit_lambda: the gradient through every label step is scaled by
        (1 + fastemit_lambda).
      return_grad: also return (px_grad [B, S, T], py_grad [B, S + 1, T],
        duration_grad [B, T, S + 1, K]): the occupations of each node's
        label and blank steps (summed over durations) and the duration
        logits' gradient, as constants (what pruning ranges are made of).

    Returns:
      scores [B], or (scores, (px_grad, py_grad, duration_grad)).
    """
    options = dict(sigma=float(sigma), clamp=float(clamp),
                   fastemit_lambda=float(fastemit_lambda))  # fmt: skip
    xla = in_xla_context()
    _loader.note_cpu_or_xla_path(xla)
    if not xla:
        scores, px_grad, py_grad, duration_grad = (
            _loader.op_library().tf_transducer_tdt_lattice(
                px=px, py=py, duration_logits=duration_logits,
                logit_lengths=logit_lengths, label_lengths=label_lengths,
                durations=list(durations), **options,
            )
        )  # fmt: skip
        if not return_grad:
            return scores
        grads = tuple(tf.stop_gradient(g) for g in (px_grad, py_grad, duration_grad))
        return scores, grads

    # Under XLA, always a graph: tf.gradients inside the forward function
    # gives the steps' occupations, for the gradient and for return_grad.
    held = []

    @tf.custom_gradient
    def lattice(px, py, duration_logits):
        labels, blanks = tdt_node_log_probs(px, py, sigma)
        dur = tf.nn.log_softmax(duration_logits, axis=-1)
        scores = tdt_scores_of_log_probs(labels, blanks, dur, durations, logit_lengths,
                                         label_lengths, fastemit_lambda)  # fmt: skip
        inputs = [px, py, duration_logits]
        grads = tf.gradients(tf.reduce_sum(scores), inputs)
        grads = [
            tf.zeros_like(x) if g is None else g
            for g, x in zip(grads, inputs, strict=True)
        ]
        if clamp > 0:
            grads[2] = tf.clip_by_value(grads[2], -clamp, clamp)
        held.extend(grads)

        def backward(d_scores):
            scale = tf.cast(d_scores, px.dtype)[:, tf.newaxis, tf.newaxis]
            return grads[0] * scale, grads[1] * scale, grads[2] * scale[..., None]

        return scores, backward

    scores = lattice(px, py, duration_logits)
    if not return_grad:
        return scores
    px_grad, py_grad, duration_grad = held
    grads = (px_grad / (1.0 + fastemit_lambda), py_grad, duration_grad)
    return scores, tuple(tf.stop_gradient(g) for g in grads)
