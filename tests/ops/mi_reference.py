# SPDX-License-Identifier: Apache-2.0
"""A float64 numpy reference of the MI recursion: a plain double loop.

Written in grid coordinates (s, t), independently of the diagonal layout the
kernel and the pure-TF path use.
"""

import numpy as np

NEG_INF = -np.inf


def mi_reference(px, py, boundary=None):
    """Scores [B], px_grad and py_grad (occupation probabilities), float64."""
    px = np.asarray(px, np.float64)
    py = np.asarray(py, np.float64)
    B, S, T1 = px.shape
    T = py.shape[2]
    r = T1 - T  # 1: regular, 0: modified
    if boundary is None:
        boundary = np.tile([0, 0, S, T], (B, 1))
    scores = np.zeros(B)
    px_grad = np.zeros_like(px)
    py_grad = np.zeros_like(py)
    for b, (sb, tb, se, te) in enumerate(np.asarray(boundary)):
        cells = [(s, t) for s in range(sb, se + 1) for t in range(tb, te + 1)]
        alpha = np.full((S + 1, T + 1), NEG_INF)
        for s, t in cells:
            if (s, t) == (sb, tb):
                alpha[s, t] = 0.0
                continue
            terms = [NEG_INF]
            if s > sb and t - 1 + r >= tb:
                terms.append(alpha[s - 1, t - 1 + r] + px[b, s - 1, t - 1 + r])
            if t > tb:
                terms.append(alpha[s, t - 1] + py[b, s, t - 1])
            alpha[s, t] = np.logaddexp.reduce(terms)
        beta = np.full((S + 1, T + 1), NEG_INF)
        for s, t in reversed(cells):
            if (s, t) == (se, te):
                beta[s, t] = 0.0
                continue
            terms = [NEG_INF]
            if s < se and t + 1 - r <= te:
                terms.append(px[b, s, t] + beta[s + 1, t + 1 - r])
            if t < te:
                terms.append(py[b, s, t] + beta[s, t + 1])
            beta[s, t] = np.logaddexp.reduce(terms)
        total = alpha[se, te]
        scores[b] = total
        if not np.isfinite(total):
            continue
        for s, t in cells:
            if s < se and t + 1 - r <= te:
                px_grad[b, s, t] = np.exp(
                    alpha[s, t] + px[b, s, t] + beta[s + 1, t + 1 - r] - total
                )
            if t < te:
                py_grad[b, s, t] = np.exp(
                    alpha[s, t] + py[b, s, t] + beta[s, t + 1] - total
                )
    return scores, px_grad, py_grad
