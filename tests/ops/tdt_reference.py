# SPDX-License-Identifier: Apache-2.0
"""A float64 reference of the TDT loss: every path of the lattice, one by
one (tiny T, U and K only)."""

import numpy as np

from tests.ops.rnnt_reference import log_softmax


def tdt_paths(token_logits, duration_logits, symbols, blank, durations, sigma=0.0):
    """The log-weights of all paths of one utterance, by depth-first search.

    token_logits [T, U + 1, C] and duration_logits [T, U + 1, K] of its own
    T frames and U symbols (no padding). From (t, u): the label y_u with
    any duration to (t + d, u + 1) while t + d < T; the blank with a
    duration d >= 1 to (t + d, u) while t + d < T, or out of the lattice
    from u = U onto t + d = T exactly.
    """
    tokens = log_softmax(token_logits) - sigma
    durs = log_softmax(duration_logits)
    frames, width = tokens.shape[:2]
    paths = []

    def walk(t, u, weight):
        for k, d in enumerate(durations):
            if u < width - 1 and t + d < frames:
                walk(t + d, u + 1, weight + tokens[t, u, symbols[u]] + durs[t, u, k])
            if d == 0:
                continue
            step = weight + tokens[t, u, blank] + durs[t, u, k]
            if t + d < frames:
                walk(t + d, u, step)
            elif t + d == frames and u == width - 1:
                paths.append(step)

    walk(0, 0, 0.0)
    return np.array(paths)


def tdt_loss_reference(token_logits, duration_logits, symbols, blank, durations,
                       logit_lengths, label_lengths, sigma=0.0):  # fmt: skip
    """Per-utterance losses [B]: -logsumexp over all paths."""
    losses = []
    for b, (frames, labels) in enumerate(
        zip(logit_lengths, label_lengths, strict=True)
    ):
        paths = tdt_paths(
            token_logits[b, :frames, : labels + 1],
            duration_logits[b, :frames, : labels + 1],
            symbols[b, :labels], blank, durations, sigma,
        )  # fmt: skip
        top = paths.max()
        losses.append(-(top + np.log(np.exp(paths - top).sum())))
    return np.array(losses)
