# SPDX-License-Identifier: Apache-2.0
"""A pure-TensorFlow RNN-T loss of the kind TF projects use today, for the
benchmark only: log_softmax over the logits, blank and label log-probs
picked with one_hot, the forward variable computed over anti-diagonals in a
tf.while_loop, and the gradient left to autodiff (which keeps the
log-softmax and the one_hot products alive for the backward pass).
"""

import tensorflow as tf


def pure_tf_rnnt_loss(logits, labels, blank=0):
    """Mean RNN-T loss of logits [B, T, U + 1, V] and labels [B, U]."""
    log_probs = tf.nn.log_softmax(logits)
    B, T, U1, V = (tf.shape(logits)[i] for i in range(4))
    blank_lp = log_probs[..., blank]  # [B, T, U + 1]
    one_hot = tf.one_hot(labels, V, dtype=logits.dtype)  # [B, U, V]
    label_lp = tf.reduce_sum(log_probs[:, :, :-1, :] * one_hot[:, None], axis=-1)
    neg_inf = tf.constant(-1e30, logits.dtype)

    # alpha[t, u] on anti-diagonals n = t + u, stored by u.
    u = tf.range(U1)
    blank_flat = tf.reshape(tf.transpose(blank_lp, [0, 2, 1]), [B, -1])  # [B, U1*T]
    label_flat = tf.reshape(tf.transpose(label_lp, [0, 2, 1]), [B, -1])  # [B, U*T]

    def body(n, alpha_prev, alphas):
        t = n - u  # [U + 1]
        valid = (t >= 0) & (t < T)
        # From (t - 1, u) by a blank.
        idx = u * T + tf.clip_by_value(t - 1, 0, T - 1)
        from_blank = alpha_prev + tf.gather(blank_flat, idx, axis=1)
        from_blank = tf.where((t >= 1)[None], from_blank, neg_inf)
        # From (t, u - 1) by label u - 1.
        idx = tf.clip_by_value(u - 1, 0, U1 - 2) * T + tf.clip_by_value(t, 0, T - 1)
        shifted = tf.pad(alpha_prev[:, :-1], [[0, 0], [1, 0]], constant_values=-1e30)
        from_label = shifted + tf.gather(label_flat, idx, axis=1)
        from_label = tf.where((u >= 1)[None], from_label, neg_inf)
        alpha = tf.reduce_logsumexp(tf.stack([from_blank, from_label]), axis=0)
        alpha = tf.where((n == 0) & (u == 0)[None], tf.zeros_like(alpha), alpha)
        alpha = tf.where(valid[None], alpha, neg_inf)
        return n + 1, alpha, alphas.write(n, alpha)

    alphas = tf.TensorArray(logits.dtype, size=T + U1 - 1)
    alpha0 = tf.fill([B, U1], neg_inf)
    _, _, alphas = tf.while_loop(
        lambda n, *_: n < T + U1 - 1, body, (0, alpha0, alphas)
    )
    last = alphas.read(T + U1 - 2)[:, U1 - 1]  # alpha[T - 1, U]
    return -tf.reduce_mean(last + blank_lp[:, T - 1, U1 - 1])
