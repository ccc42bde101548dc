# SPDX-License-Identifier: Apache-2.0
"""log Z of a recognition lattice and its arc marginals (forward-backward).

The gradient of log Z is computed from the forward-backward arc marginals
(custom gradients), not by differentiating through the time loop: it keeps
the forward weights of each frame ([T, B, C]). `log_partition_by_frame`
computes the arc weights one frame at a time and again in the backward
pass, where the marginals are pulled back through them, so that nothing
else grows with T. Functions of a `RecognitionLattice` (its alignment,
context and weights).
"""

from typing import Any

import tensorflow as tf

from tf_transducer.lattice import semirings
from tf_transducer.lattice.scans import reverse_fold
from tf_transducer.lattice.scans import scan
from tf_transducer.lattice.scans import time_major


def log_partition_by_frame(
    lattice: Any, frames: tf.Tensor, num_frames: tf.Tensor, cache: Any
) -> tf.Tensor:
    """log Z [B] with the weights of one frame at a time.

    Its gradient (frames, cache and the weight function's variables)
    recomputes each frame's weights and pulls the arc marginals back
    through them.
    """
    n, log = lattice.alignment.num_states(), semirings.Log
    has_cache = cache is not None
    cache_in = cache if has_cache else tf.zeros([0])
    valid = tf.range(tf.shape(frames)[1])[:, None] < num_frames[None]  # [T, B]

    def weights(frame, cache_value):
        return lattice._weights(frame, cache_value if has_cache else None)

    @tf.custom_gradient
    def log_z(frames, cache_in):
        alpha0 = lattice._start_context(tf.shape(frames)[0], log, frames.dtype)

        def forward(alpha, inputs):
            frame, ok = inputs
            b, lex = weights(frame, cache_in)
            new = lattice.alignment.forward(
                alpha, [b] * n, [lex] * n, lattice.context, log
            )
            return tf.where(ok[:, None], new, alpha)

        after = scan(forward, (time_major(frames), valid), alpha0)
        before = tf.concat([alpha0[None], after], axis=0)[:-1]  # [T, B, C]
        final = tf.cond(tf.shape(after)[0] > 0, lambda: after[-1], lambda: alpha0)
        value = log.sum(final, axis=-1)

        def grad(g, variables=None):
            variables = list(variables or [])

            def backward(carry, inputs):
                beta, cache_grad, var_grads = carry
                frame, alpha, ok = inputs
                with tf.GradientTape() as tape:
                    tape.watch([frame, cache_in])
                    b, lex = weights(frame, cache_in)
                new_beta, blank_m, lexical_m = lattice.alignment.backward(
                    alpha, [b] * n, [lex] * n, beta, value, lattice.context
                )
                keep = tf.cast(ok, b.dtype)[:, None]
                blank_m = tf.add_n(blank_m) * keep * g[:, None]
                lexical_m = tf.add_n(lexical_m) * keep[..., None] * g[:, None, None]
                grads = tape.gradient(
                    [b, lex],
                    [frame, cache_in, *variables],
                    output_gradients=[
                        tf.stop_gradient(blank_m),
                        tf.stop_gradient(lexical_m),
                    ],
                    unconnected_gradients=tf.UnconnectedGradients.ZERO,
                )
                grads = [tf.convert_to_tensor(x) for x in grads]
                new_beta = tf.where(ok[:, None], new_beta, beta)
                var_grads = [a + b_ for a, b_ in zip(var_grads, grads[2:], strict=True)]
                return (new_beta, cache_grad + grads[1], var_grads), grads[0]

            beta0 = tf.zeros_like(alpha0)  # the Log one: all states final
            init = (
                beta0,
                tf.zeros_like(cache_in),
                [tf.zeros_like(v) for v in variables],
            )
            frame_spec = tf.TensorSpec([frames.shape[0], frames.shape[2]], frames.dtype)
            frame_shape = tf.shape(frames)[0::2]  # [B, F]
            carry, frame_grads = reverse_fold(
                backward,
                (time_major(frames), before, valid),
                init,
                frame_spec,
                frame_shape,
            )
            _, cache_grad, var_grads = carry
            return (time_major(frame_grads), cache_grad), var_grads

        return value, grad

    return log_z(frames, cache_in)


def log_partition(
    lattice: Any, blank: tf.Tensor, lexical: tf.Tensor, num_frames: tf.Tensor
) -> tf.Tensor:
    """log Z [B] of the whole weights [B, T, C] and [B, T, C, V], with its gradient."""

    @tf.custom_gradient
    def log_z(blank, lexical):
        value, alphas = log_z_and_alphas(lattice, blank, lexical, num_frames)

        def grad(g):
            _, blank_m, lexical_m = marginals(
                lattice, blank, lexical, num_frames, alphas, value
            )
            return (
                g[:, None, None] * tf.reduce_sum(blank_m, axis=2),
                g[:, None, None, None] * tf.reduce_sum(lexical_m, axis=2),
            )

        return value, grad

    return log_z(blank, lexical)


def log_z_and_alphas(
    lattice: Any, blank: tf.Tensor, lexical: tf.Tensor, num_frames: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """(log Z [B], the forward weights before each frame [T, B, C])."""
    log = semirings.Log
    after = lattice._forward_alpha(blank, lexical, num_frames, log, keep_all=True)
    batch = tf.shape(blank)[0]
    alpha0 = lattice._start_context(batch, log, blank.dtype)
    before = tf.concat([alpha0[None], after], axis=0)[:-1]  # [T, B, C]
    final = tf.cond(tf.shape(after)[0] > 0, lambda: after[-1], lambda: alpha0)
    return log.sum(final, axis=-1), before


def marginals(
    lattice: Any, blank: tf.Tensor, lexical: tf.Tensor, num_frames: tf.Tensor,
    alphas: tf.Tensor, log_z: tf.Tensor,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:  # fmt: skip
    """Backward pass: (beta of the start, blank marginals, lexical marginals).

    Shapes: [B, C], [B, T, A, C] and [B, T, A, C, V].
    """
    n = lattice.alignment.num_states()
    total = tf.shape(blank)[1]
    valid = tf.range(total)[:, None] < num_frames[None]  # [T, B]
    beta0 = tf.zeros(tf.shape(blank)[0::2], blank.dtype)  # the Log one: final

    def body(carry, inputs):
        beta = carry[0]
        alpha, b, lex, ok = inputs
        new_beta, blank_m, lexical_m = lattice.alignment.backward(
            alpha, [b] * n, [lex] * n, beta, log_z, lattice.context
        )
        keep = ok[:, None]
        new_beta = tf.where(keep, new_beta, beta)
        blank_m = tf.where(keep[None], tf.stack(blank_m), 0.0)
        lexical_m = tf.where(keep[None, :, :, None], tf.stack(lexical_m), 0.0)
        return new_beta, blank_m, lexical_m

    shape_b = tf.stack([n, tf.shape(blank)[0], tf.shape(blank)[2]])
    init = (
        beta0,
        tf.zeros(shape_b, blank.dtype),
        tf.zeros(tf.concat([shape_b, [tf.shape(lexical)[-1]]], 0), blank.dtype),
    )
    betas, blank_m, lexical_m = scan(
        body,
        (alphas, time_major(blank), time_major(lexical), valid),
        init,
        reverse=True,
    )
    start_beta = tf.cond(total > 0, lambda: betas[0], lambda: beta0)
    blank_m = tf.transpose(blank_m, [2, 0, 1, 3])
    lexical_m = tf.transpose(lexical_m, [2, 0, 1, 3, 4])
    return start_beta, blank_m, lexical_m
