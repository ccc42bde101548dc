# SPDX-License-Identifier: Apache-2.0
"""The lattice benchmark's configuration and inputs (shared by the TF and
LAST workers; no TensorFlow or JAX imports here)."""

import numpy as np

B, T, F, U, V, CONTEXT = 4, 20, 128, 8, 26, 2
HIDDEN, RNN, RNN_EMB = 128, 128, 64


def inputs(T=T):
    """frames [B, T, F], num_frames [B], labels [B, U], num_labels [B]."""
    rng = np.random.default_rng(0)
    frames = rng.normal(size=(B, T, F)).astype(np.float32)
    num_frames = np.array([T, T - 3, T - 6, T - 9], np.int32)
    labels = rng.integers(1, V + 1, size=(B, U)).astype(np.int32)
    num_labels = np.array([U, U - 2, U - 3, U - 4], np.int32)
    return frames, num_frames, labels, num_labels
