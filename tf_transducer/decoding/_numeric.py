# SPDX-License-Identifier: Apache-2.0
"""Log-domain arithmetic of the numpy decoders (float64)."""

import math

import numpy as np
from numpy.typing import ArrayLike


def log_softmax(x: ArrayLike) -> np.ndarray:
    """log softmax over the last axis of x, in float64."""
    x = np.asarray(x, np.float64)
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def log_add(a: float, b: float) -> float:
    """log(exp(a) + exp(b)) of two Python floats; -inf is the zero."""
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    return max(a, b) + math.log1p(math.exp(-abs(a - b)))


def entropy_confidence(log_probs: ArrayLike) -> np.ndarray:
    """1 - H(p) / log V of rows of log-probabilities [..., V], in [0, 1]."""
    log_probs = np.asarray(log_probs, np.float64)
    probs = np.exp(log_probs)
    entropy = -np.sum(np.where(probs > 0, probs * log_probs, 0.0), axis=-1)
    return np.clip(1.0 - entropy / math.log(log_probs.shape[-1]), 0.0, 1.0)
