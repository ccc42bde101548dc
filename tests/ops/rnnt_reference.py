# SPDX-License-Identifier: Apache-2.0
"""A float64 numpy reference of the RNN-T losses, written on the lattice of
frames and symbols directly (not through px / py), one cell at a time."""

import numpy as np


def log_softmax(x, axis=-1):
    x = np.asarray(x, np.float64)
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def rnnt_loss_reference(
    logits, symbols, blank, boundary=None, rnnt_type="regular", delay_penalty=0.0
):
    """Per-sequence losses [B] of logits [B, T, S + 1, C] (float64).

    alpha[t, s]: log-prob of having consumed t frames and emitted s symbols.
      blank at (t, s) -> (t + 1, s), for t < t_end;
      symbol s at (t, s) -> (t, s + 1) (regular, t < t_end),
                         -> (t + 1, s + 1) (modified),
                         -> (t + 1, s + 1) paying also the blank at (t, s + 1)
                            (constrained);
    a symbol emitted on frame t gains ((t_end - 1) / 2 - t) * delay_penalty.
    The loss is -alpha[t_end, s_end], starting from alpha[t_begin, s_begin].
    """
    lp = log_softmax(logits)
    B, T, S1, _ = lp.shape
    S = S1 - 1
    symbols = np.asarray(symbols)
    if boundary is None:
        boundary = np.tile([0, 0, S, T], (B, 1))
    losses = np.zeros(B)
    for b, (sb, tb, se, te) in enumerate(np.asarray(boundary)):
        alpha = np.full((T + 1, S + 1), -np.inf)
        alpha[tb, sb] = 0.0
        for t in range(tb, te + 1):
            for s in range(sb, se + 1):
                a = alpha[t, s]
                if a == -np.inf or t == te:  # nothing is emitted after t_end
                    continue
                bonus = ((te - 1) / 2 - t) * delay_penalty
                # blank
                alpha[t + 1, s] = np.logaddexp(alpha[t + 1, s], a + lp[b, t, s, blank])
                if s < se:
                    w = lp[b, t, s, symbols[b, s]] + bonus
                    if rnnt_type == "regular":
                        alpha[t, s + 1] = np.logaddexp(alpha[t, s + 1], a + w)
                    else:
                        if rnnt_type == "constrained":
                            w = w + lp[b, t, s + 1, blank]
                        alpha[t + 1, s + 1] = np.logaddexp(alpha[t + 1, s + 1], a + w)
        losses[b] = -alpha[te, se]
    return losses


def numerical_gradient(fn, x, eps=1e-6):
    """Central differences of the scalar fn at x (float64)."""
    x = np.array(x, np.float64)
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps
        up = fn(x)
        x[i] = old - eps
        down = fn(x)
        x[i] = old
        grad[i] = (up - down) / (2 * eps)
    return grad


def prune_ranges_reference(px_grad, py_grad, boundary, s_range):
    """ranges [B, T, s_range] as the pruned-RNN-T recipe defines them."""
    B, S, T1 = px_grad.shape
    T = py_grad.shape[2]
    step = 2 if T1 == T else min(s_range, S + 1)
    s_range = min(s_range, S + 1)
    s_begin = np.zeros((B, T), np.int64)
    for b in range(B):
        _, _, s_end, t_end = boundary[b]
        for t in range(T):
            if t < t_end - 1:
                window = [
                    py_grad[b, i : i + s_range, t].sum()
                    - (px_grad[b, i - 1, t] if i > 0 else 0.0)
                    for i in range(S + 2 - s_range)
                ]
                s_begin[b, t] = int(np.argmax(window))  # the first maximum
            else:
                s_begin[b, t] = max(s_end - s_range + 1, 0)
        x = s_begin[b]
        for t in range(T - 2, -1, -1):  # non-decreasing lower bound
            x[t] = min(x[t], x[t + 1])
        ramp = (step - 1) * np.arange(T)
        y = ramp - x
        for t in range(T - 2, -1, -1):
            y[t] = min(y[t], y[t + 1])
        s_begin[b] = ramp - np.maximum(y, 0)
    return s_begin[..., np.newaxis] + np.arange(s_range)


def finish_lattice(px, py, boundary, rnnt_type):
    """No symbol at t_end (regular); the next blank paid by symbols
    (constrained)."""
    if rnnt_type == "regular" and boundary is not None:
        for b, row in enumerate(boundary):
            px[b, :, row[3]] = -np.inf
    if rnnt_type == "constrained":
        px = px + py[:, 1:, :]
    return px, py


def pruned_logprobs_reference(logits, symbols, ranges, blank, boundary, rnnt_type):
    """px, py (float64) of pruned logits [B, T, s_range, C], cell by cell."""
    lp = log_softmax(logits)
    B, T, s_range, _ = lp.shape
    S = np.shape(symbols)[1]
    px = np.full((B, S, T + (rnnt_type == "regular")), -np.inf)
    py = np.full((B, S + 1, T), -np.inf)
    for b, t, j in np.ndindex(B, T, s_range):
        s = ranges[b, t, j]
        py[b, s, t] = lp[b, t, j, blank]
        if s < S:
            px[b, s, t] = lp[b, t, j, symbols[b][s]]
    return finish_lattice(px, py, boundary, rnnt_type)


def smoothed_logprobs_reference(
    lm, am, symbols, blank, lm_only_scale, am_only_scale, boundary, rnnt_type
):
    """px, py of the smoothed simple loss, one (s, t) cell at a time."""
    lm, am = np.asarray(lm, np.float64), np.asarray(am, np.float64)
    B, T, _ = am.shape
    S = lm.shape[1] - 1
    p_lm = np.exp(log_softmax(lm))  # [B, S + 1, C]
    # The LM's distribution averaged over the rows inside the boundary (all
    # rows without one: k2's definition), so that padding changes nothing.
    rows = np.ones((B, S + 1), bool)
    if boundary is not None:
        s = np.arange(S + 1)
        rows = np.stack([(s >= b[0]) & (s <= b[2]) for b in np.asarray(boundary)])
    unigram = p_lm[rows].mean(axis=0)
    scales = (1 - lm_only_scale - am_only_scale, lm_only_scale, am_only_scale)
    px = np.full((B, S, T + (rnnt_type == "regular")), -np.inf)
    py = np.zeros((B, S + 1, T))
    for b, s, t in np.ndindex(B, S + 1, T):
        dists = (
            log_softmax(lm[b, s] + am[b, t]),
            log_softmax(lm[b, s]),
            log_softmax(am[b, t] + np.log(unigram)),
        )
        py[b, s, t] = sum(w * d[blank] for w, d in zip(scales, dists, strict=True))
        if s < S:
            y = symbols[b][s]
            px[b, s, t] = sum(w * d[y] for w, d in zip(scales, dists, strict=True))
    return finish_lattice(px, py, boundary, rnnt_type)
