# SPDX-License-Identifier: Apache-2.0
"""Run by test_mutual_information.py in a fresh interpreter with 3 threads.

With B < threads and long sequences the kernel uses its wavefront schedule
(cc/kernels/chain_scheduler.h); its scores and gradients must equal the
pure-TF path's.  Prints one "ok" line per case.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(__file__))))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(3)
tf.config.threading.set_inter_op_parallelism_threads(3)

from tests.ops.test_mutual_information import random_case  # noqa: E402
from tests.ops.test_mutual_information import run  # noqa: E402

# (B, S, T): 1 sequence in 3 bands, 2 sequences in 2 bands each; every case
# has at least 2^20 cells per sequence, the kernel's wavefront threshold.
for B, S, T, modified in [
    (1, 1000, 1100, False),
    (2, 900, 1300, True),
    (1, 1000, 1100, True),
    (2, 1030, 1000, False),
]:
    rng = np.random.default_rng([B, S, T])
    px, py, bnd = random_case(rng, B, S, T, modified, np.float64, boundary=True)
    bnd[0] = [0, 0, S, T]
    for got, want in zip(run("op", px, py, bnd), run("tf", px, py, bnd), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    print(f"ok B={B} S={S} T={T} modified={modified}")
