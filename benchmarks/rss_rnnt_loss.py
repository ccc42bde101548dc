# SPDX-License-Identifier: Apache-2.0
"""Peak resident memory of one RNN-T loss step, above the logits.

Each case runs in a fresh interpreter: it makes the logits, loads the
kernels on a tiny problem, resets the kernel's peak-RSS mark
(/proc/self/clear_refs, Linux), runs one eager forward + backward step and
reads the peak back (VmHWM). Peak minus the RSS before the step, over the
logits' size, is the step's extra memory; the gradient alone is 1.0x.
(In a warm process freed memory stays resident, so the peak would not move.)

Usage: python -m benchmarks.rss_rnnt_loss
"""

import os
import subprocess

from absl import app
from absl import flags

from benchmarks import _harness  # noqa: E402
from benchmarks import peak_rss  # noqa: E402
from benchmarks.rnnt_cases import IMPLS  # noqa: E402
from benchmarks.rnnt_cases import SHAPES  # noqa: E402
from benchmarks.rnnt_cases import loss_function  # noqa: E402

WORKER = flags.DEFINE_string("worker", None, "Internal: 'impl,B,T,U,V'.")


def measure(impl, B, T, U, V):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    def step(x, y):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = loss_function(impl, y)(x)
        # Eager ops are done when they return; .numpy() would add a copy of
        # the gradient (TF 2.21) that is not the step's.
        return tape.gradient(loss, x)

    logits = tf.random.stateless_normal((B, T, U + 1, V), seed=[0, 0])
    labels = tf.constant(np.random.default_rng(0).integers(1, V, size=(B, U)))
    step(tf.random.stateless_normal((1, 3, 3, 4), seed=[0, 0]), tf.constant([[1, 2]]))
    before = peak_rss.start()
    step(logits, labels)
    return peak_rss.peak_above(before) / (B * T * (U + 1) * V * 4)


def main(argv):
    del argv
    if WORKER.value:
        impl, *dims = WORKER.value.split(",")
        print(measure(impl, *map(int, dims)))
        return
    print("| (B, T, U, V) | what | peak RSS of a step above the logits |")
    print("| --- | --- | --- |")
    for shape in SHAPES:
        for impl, name in IMPLS.items():
            spec = ",".join(map(str, (impl, *shape)))
            out = subprocess.run(
                [*_harness.self_command(__spec__), f"--worker={spec}"],
                check=True,
                capture_output=True,
                text=True,
                cwd=_harness.ROOT,
            ).stdout
            print(f"| {shape} | {name} | {float(out.split()[-1]):.2f}x |")


if __name__ == "__main__":
    app.run(main)
