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
