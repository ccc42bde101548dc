# SPDX-License-Identifier: Apache-2.0
"""The Token-and-Duration Transducer lattice in plain TensorFlow.

The reference of the fused op (`tdt_loss`) and its path under XLA. From
node (t, u) of utterance b (0 <= t < T_b, 0 <= u <= U_b), for each
duration d_k of `durations`:

    label y_u, u < U_b:  (t, u) -> (t + d_k, u + 1), t + d_k < T_b,
                         weight label[t, u] + dur[t, u, k]
    blank, d_k >= 1:     (t, u) -> (t + d_k, u),     t + d_k < T_b,
                         weight blank[t, u] + dur[t, u, k]
    end, d_k >= 1:       (t, U_b) -> end when t + d_k = T_b, same weight

so a path ends with a blank that lands exactly on T_b. alpha(0, 0) = 0 and
the score is log P(y | x), the log-sum over all paths. A forward scan over
frames gives alpha (the steps of d_k >= 1 are pushed into a ring of the
next frames' inputs; the d_k = 0 label steps inside a frame are a
first-order recurrence over u, solved at once from its partial sums); a
backward scan gives beta the same way, and every step's occupation is
exp(alpha + weight + beta - score). Only ops XLA compiles are used.
"""

from collections.abc import Sequence

import tensorflow as tf

_NEG_INF = float("-inf")


def _log_sum(x: tf.Tensor, axis: int) -> tf.Tensor:
    """logsumexp over axis, -inf (not NaN) where every entry is -inf."""
    hi = tf.reduce_max(x, axis=axis, keepdims=True)
    safe = tf.where(tf.math.is_finite(hi), hi, tf.zeros_like(hi))
    total = tf.reduce_sum(tf.exp(x - safe), axis=axis, keepdims=True)
    return tf.squeeze(safe + tf.math.log(total), axis=axis)


def _chain(start: tf.Tensor, steps: tf.Tensor, reverse: bool) -> tf.Tensor:
    """x_u = logaddexp(start_u, x_{u-1} + steps_{u-1}) for all u at once.

    start [B, W], steps [B, W - 1] (the d = 0 label steps of a frame);
    reverse: x_u = logaddexp(start_u, steps_u + x_{u+1}) instead. Solved as
    x_u = logsumexp_v(start_v + the sum of the steps between v and u), the
    sums taken by masked cumulative sums: exact with -inf steps, and no
    difference of sums to cancel.
    """
    width = tf.shape(start)[1]
    steps = tf.pad(steps, [[0, 0], [0, 1]])[:, tf.newaxis, :]  # [B, 1, W]
    v = tf.range(width)[:, tf.newaxis]  # where the chain starts
    w = tf.range(width)[tf.newaxis, :]  # the step, then where it arrives
    zero = tf.zeros_like(steps)
    if reverse:  # at [v, u]: steps u .. v - 1, for u <= v
        sums = tf.cumsum(tf.where(w < v, steps, zero), axis=2, reverse=True)
        reach = w <= v
    else:  # at [v, u]: steps v .. u - 1, for u >= v
        sums = tf.cumsum(tf.where(w >= v, steps, zero), axis=2, exclusive=True)
        reach = w >= v
    neg_inf = tf.constant(_NEG_INF, start.dtype)
    terms = tf.where(reach, start[:, :, tf.newaxis] + sums, neg_inf)
    return _log_sum(terms, axis=1)


def _log_add(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    """log(exp(a) + exp(b)) elementwise, -inf when both are -inf."""
    return _log_sum(tf.stack([a, b]), axis=0)


def tdt_log_probs(
    token_logits: tf.Tensor, duration_logits: tf.Tensor, symbols: tf.Tensor,
    blank: int, sigma: float = 0.0,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:  # fmt: skip
    """(label, blank, duration) log-probs of the lattice's nodes.

    Args:
      token_logits: float [B, T, S + 1, C].
      duration_logits: float [B, T, S + 1, K].
      symbols: int [B, S].
      blank: the blank's class.
      sigma: subtracted from every token log-prob (logit under-normalisation).

    Returns:
      label [B, T, S] (log-prob of symbols[b, u] at node (t, u)), blank
      [B, T, S + 1], and duration [B, T, S + 1, K], log-softmaxed apart.
    """
    tokens = tf.nn.log_softmax(token_logits, axis=-1) - sigma
    rows = tokens[:, :, :-1]  # [B, T, S, C]
    index = tf.broadcast_to(  # gather's batch_dims needs it over T too
        tf.cast(symbols, tf.int32)[:, tf.newaxis, :, tf.newaxis],
        tf.concat([tf.shape(rows)[:3], [1]], axis=0),
    )
    labels = tf.gather(rows, index, axis=3, batch_dims=3)[..., 0]
    return labels, tokens[..., blank], tf.nn.log_softmax(duration_logits, axis=-1)


def tdt_step_weights(
    labels: tf.Tensor, blanks: tf.Tensor, durations_lp: tf.Tensor,
    durations: Sequence[int], logit_lengths: tf.Tensor, label_lengths: tf.Tensor,
) -> tuple[tf.Tensor, tf.Tensor]:  # fmt: skip
    """The weights of the label steps [B, T, S, K] and blank steps [B, T, S + 1, K].

    -inf for the steps no path can take: from padding, and blank steps of
    duration 0.
    """
    t_len, width = tf.shape(blanks)[1], tf.shape(blanks)[2]
    t = tf.range(t_len)[tf.newaxis, :, tf.newaxis]
    u = tf.range(width)[tf.newaxis, tf.newaxis, :]
    frames = tf.cast(logit_lengths, tf.int32)[:, tf.newaxis, tf.newaxis]
    labels_b = tf.cast(label_lengths, tf.int32)[:, tf.newaxis, tf.newaxis]
    node = (t < frames) & (u <= labels_b)  # [B, T, W]
    neg_inf = tf.constant(_NEG_INF, durations_lp.dtype)
    moves = tf.constant([d >= 1 for d in durations])
    label_w = labels[..., tf.newaxis] + durations_lp[:, :, :-1]
    label_w = tf.where((node & (u < labels_b))[:, :, :-1, tf.newaxis], label_w, neg_inf)
    blank_w = blanks[..., tf.newaxis] + durations_lp
    blank_w = tf.where(node[..., tf.newaxis] & moves, blank_w, neg_inf)
    return label_w, blank_w


def _end_weights(blank_w, durations, logit_lengths, label_lengths):
    """[B, T, W]: the weight of ending from (t, u), -inf but at u = U_b."""
    t_len, width = tf.shape(blank_w)[1], tf.shape(blank_w)[2]
    t = tf.range(t_len)[tf.newaxis, :, tf.newaxis]
    u = tf.range(width)[tf.newaxis, tf.newaxis, :]
    frames = logit_lengths[:, tf.newaxis, tf.newaxis, tf.newaxis]
    d = tf.constant(durations, tf.int32)
    lands = (t[..., tf.newaxis] + d == frames) & (d >= 1)
    at_end = (u == label_lengths[:, tf.newaxis, tf.newaxis])[..., tf.newaxis]
    neg_inf = tf.constant(_NEG_INF, blank_w.dtype)
    return _log_sum(tf.where(lands & at_end, blank_w, neg_inf), axis=3)


def _forward_backward(label_w, blank_w, durations, logit_lengths, label_lengths):
    """Scores [B] and the occupations of the label and blank steps."""
    dtype = blank_w.dtype
    neg_inf = tf.constant(_NEG_INF, dtype)
    batch, t_len, width = (tf.shape(blank_w)[i] for i in range(3))
    ring_size = max(durations)
    zero = durations.index(0)
    moving = [(k, d) for k, d in enumerate(durations) if d >= 1]
    ends = _end_weights(blank_w, durations, logit_lengths, label_lengths)
    by_frame = [tf.transpose(x, [1, 0, 2, 3]) for x in (label_w, blank_w)]
    pad_u = [[0, 0], [1, 0]]

    def forward(ring, elems):
        label_t, blank_t = elems
        alpha = _chain(ring[:, 0], label_t[:, :, zero], reverse=False)
        out = [tf.fill([batch, width], neg_inf) for _ in range(ring_size)]
        for k, d in moving:
            label_in = tf.pad(alpha[:, :-1] + label_t[:, :, k], pad_u,
                              constant_values=_NEG_INF)  # fmt: skip
            out[d - 1] = _log_add(alpha + blank_t[:, :, k], label_in)
        later = tf.concat([ring[:, 1:], tf.fill([batch, 1, width], neg_inf)], 1)
        return _log_add(later, tf.stack(out, axis=1)), alpha

    start = tf.one_hot(tf.zeros([batch], tf.int32), width, 0.0, _NEG_INF, dtype=dtype)
    ring0 = tf.concat(
        [start[:, tf.newaxis], tf.fill([batch, ring_size - 1, width], neg_inf)], 1
    )
    _, alpha = tf.scan(
        lambda carry, e: forward(carry[0], e),
        tuple(by_frame),
        initializer=(ring0, tf.fill([batch, width], neg_inf)),
    )
    alpha = tf.transpose(alpha, [1, 0, 2])  # [B, T, W]
    scores = _log_sum(tf.reshape(alpha + ends, [batch, -1]), axis=1)

    def backward(ring, elems):
        label_t, blank_t, end_t = elems
        start_u = end_t
        for k, d in moving:
            later = ring[:, d - 1]  # beta(t + d, :)
            label_out = tf.pad(label_t[:, :, k] + later[:, 1:], [[0, 0], [0, 1]],
                               constant_values=_NEG_INF)  # fmt: skip
            start_u = _log_add(start_u, _log_add(blank_t[:, :, k] + later, label_out))
        beta = _chain(start_u, label_t[:, :, zero], reverse=True)
        return tf.concat([beta[:, tf.newaxis], ring[:, :-1]], 1), beta

    _, beta = tf.scan(
        lambda carry, e: backward(carry[0], e),
        (*by_frame, tf.transpose(ends, [1, 0, 2])),
        initializer=(tf.fill([batch, ring_size, width], neg_inf),
                     tf.fill([batch, width], neg_inf)),
        reverse=True,
    )  # fmt: skip
    beta = tf.transpose(beta, [1, 0, 2])  # [B, T, W]

    # Occupation of a step: exp(alpha + weight + beta(target) - score).
    padded = tf.pad(beta, [[0, 0], [0, ring_size], [0, 1]], constant_values=_NEG_INF)
    base = alpha - scores[:, tf.newaxis, tf.newaxis]
    label_occ, blank_occ = [], []
    for k, d in enumerate(durations):
        label_to = padded[:, d : d + t_len, 1:]
        label_occ.append(
            base[:, :, :-1] + label_w[..., k] + label_to[:, :, : width - 1]
        )
        blank_to = padded[:, d : d + t_len, :width]
        if d >= 1:
            lands = tf.range(t_len)[tf.newaxis, :] + d == logit_lengths[:, tf.newaxis]
            at_end = tf.one_hot(
                label_lengths, width, dtype=tf.bool, on_value=True, off_value=False
            )
            end_here = lands[:, :, tf.newaxis] & at_end[:, tf.newaxis, :]
            blank_to = tf.where(end_here, tf.zeros_like(blank_to), blank_to)
        blank_occ.append(base + blank_w[..., k] + blank_to)

    def occupation(x):
        x = tf.stack(x, axis=-1)
        return tf.where(
            tf.math.is_finite(x), tf.exp(tf.minimum(x, 0)), tf.zeros_like(x)
        )

    return scores, occupation(label_occ), occupation(blank_occ)


def tdt_scores_tf(
    label_w: tf.Tensor, blank_w: tf.Tensor, durations: Sequence[int],
    logit_lengths: tf.Tensor, label_lengths: tf.Tensor,
) -> tf.Tensor:  # fmt: skip
    """log P(y | x) [B] of the lattice's step weights, differentiable.

    Args:
      label_w: float [B, T, S, K], the label steps' weights (`tdt_step_weights`).
      blank_w: float [B, T, S + 1, K], the blank steps' weights.
      durations: the K durations, sorted, with 0 and 1.
      logit_lengths: int [B], frames T_b (>= 1).
      label_lengths: int [B], symbols U_b.

    The gradient of the scores with respect to a step's weight is that
    step's occupation (the posterior probability that a path takes it).
    """
    durations = list(durations)
    frames = tf.cast(logit_lengths, tf.int32)
    labels = tf.cast(label_lengths, tf.int32)

    @tf.custom_gradient
    def scores_of(label_w, blank_w):
        scores, label_occ, blank_occ = _forward_backward(
            label_w, blank_w, durations, frames, labels
        )

        def grad(d_scores):
            scale = tf.cast(d_scores, label_occ.dtype)[:, None, None, None]
            return label_occ * scale, blank_occ * scale

        return scores, grad

    return scores_of(label_w, blank_w)


def tdt_node_log_probs(
    px: tf.Tensor, py: tf.Tensor, sigma: float = 0.0
) -> tuple[tf.Tensor, tf.Tensor]:
    """(label [B, T, S], blank [B, T, S + 1]) from px [B, S, T], py [B, S + 1, T].

    The layout `tdt_log_probs` returns, sigma subtracted from both.
    """
    return tf.transpose(px, [0, 2, 1]) - sigma, tf.transpose(py, [0, 2, 1]) - sigma


def tdt_scores_of_log_probs(
    labels: tf.Tensor, blanks: tf.Tensor, durations_lp: tf.Tensor,
    durations: Sequence[int], logit_lengths: tf.Tensor, label_lengths: tf.Tensor,
    fastemit_lambda: float = 0.0,
) -> tf.Tensor:  # fmt: skip
    """log P(y | x) [B] from the nodes' log-probs, differentiable.

    labels [B, T, S], blanks [B, T, S + 1] and durations_lp [B, T, S + 1, K]
    as `tdt_log_probs` returns them. FastEmit as the fused op: the value is
    unchanged, the gradient through every label step (1 + fastemit_lambda)
    times.
    """
    label_w, blank_w = tdt_step_weights(
        labels, blanks, durations_lp, durations, logit_lengths, label_lengths
    )
    if fastemit_lambda > 0:  # the same value, its gradient (1 + lambda) times
        delta = label_w - tf.stop_gradient(label_w)
        label_w += fastemit_lambda * tf.where(
            tf.math.is_finite(label_w), delta, tf.zeros_like(delta)
        )
    return tdt_scores_tf(label_w, blank_w, durations, logit_lengths, label_lengths)
