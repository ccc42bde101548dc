# SPDX-License-Identifier: Apache-2.0
"""16-bit logits: read as such by the fused op, or cast to float32 first.

Until the fused `rnnt_loss` op took float16 / bfloat16 logits, the wrapper
cast them to float32 (a float32 copy of the logits, and a float32 gradient
cast back). This compares the two on the CPU op, side by side in one run:
forward + backward time (median of --repeats) and the peak resident memory
of one step above the logits, each case in a fresh interpreter (as
rss_rnnt_loss.py does).

Usage: python -m benchmarks.bench_half_logits [--repeats 10]
"""

import json
import os
import subprocess
import time

from absl import app
from absl import flags

from benchmarks import _harness  # noqa: E402
from benchmarks import peak_rss  # noqa: E402

REPEATS = flags.DEFINE_integer("repeats", 10, "Timed steps per case.")
WORKER = flags.DEFINE_string("worker", None, "Internal: 'dtype,path,B,T,U,V'.")
SHAPES = [(8, 150, 40, 500), (4, 300, 60, 1000)]


def measure(dtype_name, path, B, T, U, V, repeats):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    import tf_transducer as tt

    dtype = tf.as_dtype(dtype_name)

    def step(x, y):
        with tf.GradientTape() as tape:
            tape.watch(x)
            inputs = tf.cast(x, tf.float32) if path == "cast" else x
            loss = tt.ops.rnnt_loss(inputs, y, termination_symbol=0)
        return tape.gradient(loss, x)

    logits = tf.cast(tf.random.stateless_normal((B, T, U + 1, V), seed=[0, 0]), dtype)
    labels = tf.constant(np.random.default_rng(0).integers(1, V, size=(B, U)))
    step(tf.cast(tf.zeros((1, 3, 3, 4)), dtype), tf.constant([[1, 2]]))
    before = peak_rss.start()
    step(logits, labels)  # eager: done on return (no .numpy() copy counted)
    peak = peak_rss.peak_above(before) / (B * T * (U + 1) * V * dtype.size)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step(logits, labels).numpy()
        times.append(time.perf_counter() - start)
    return {"ms": 1000 * sorted(times)[len(times) // 2], "peak": peak}


def main(argv):
    del argv
    if WORKER.value:
        dtype, path, *dims = WORKER.value.split(",")
        print(json.dumps(measure(dtype, path, *map(int, dims), REPEATS.value)))
        return
    print("| (B, T, U, V) | logits | path | fwd+bwd ms | peak RSS above the logits |")
    print("|---|---|---|---|---|")
    for shape in SHAPES:
        for dtype in ("float16", "bfloat16"):
            for path, name in (("native", "as such"), ("cast", "cast to float32")):
                spec = ",".join([dtype, path, *map(str, shape)])
                out = subprocess.run(
                    [
                        *_harness.self_command(__spec__),
                        f"--worker={spec}",
                        f"--repeats={REPEATS.value}",
                    ],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                r = json.loads(out.stdout.strip().splitlines()[-1])
                ms, peak = r["ms"], r["peak"]
                row = f"| {shape} | {dtype} | {name} | {ms:.1f} | {peak:.2f}x |"
                print(row, flush=True)


if __name__ == "__main__":
    app.run(main)
