# SPDX-License-Identifier: Apache-2.0
"""Benchmark of the fused TDT loss against the fused RNN-T loss, 2 threads.

Side by side (benchmarks/_harness.py), forward + backward, float32, at
(B, T, U, V) = (8, 150, 40, 500) and (4, 300, 80, 1024) with K = 5
durations [0, 1, 2, 3, 4]:

  * rnnt: tt.rnnt_loss on token logits [B, T, U + 1, V] and its gradient;
  * tdt: tt.tdt_loss on the same token logits and duration logits
    [B, T, U + 1, K], and the gradients of both;
  * tdt_xla: the pure-TF twin (`jit_compile=True`), for reference.

Also the peak of TensorFlow's tensor memory during a step above what is held
before it (the logits), as a multiple of the token logits' size.

Usage: python -m benchmarks.bench_tdt_loss [--rounds 10] [--xla]
"""

import os
import platform

from absl import app
from absl import flags

from benchmarks import _harness

ROUNDS = flags.DEFINE_integer("rounds", 10, "Timings per configuration.", lower_bound=3)
XLA = flags.DEFINE_boolean("xla", False, "Also time the pure-TF twin under XLA.")
WORKER = flags.DEFINE_string("worker", None, "Internal: 'impl,B,T,U,V'.")

SHAPES = [(8, 150, 40, 500), (4, 300, 80, 1024)]
DURATIONS = [0, 1, 2, 3, 4]
IMPLS = {
    "rnnt": "rnnt_loss (fused op)",
    "tdt": "tdt_loss (fused op)",
    "tdt_xla": "tdt_loss, pure TF under XLA",
}


def serve(impl, B, T, U, V):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["TF_CPU_ALLOCATOR_USE_BFC"] = "true"  # exact byte counts
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(2)
    tf.config.threading.set_inter_op_parallelism_threads(2)

    import tf_transducer as tt

    labels = tf.constant(np.random.default_rng(0).integers(1, V, size=(B, U)))
    tokens = tf.random.stateless_normal((B, T, U + 1, V), seed=[0, 0])
    durs = tf.random.stateless_normal((B, T, U + 1, len(DURATIONS)), seed=[1, 0])

    def step(x, w):
        with tf.GradientTape() as tape:
            tape.watch([x, w])
            if impl == "rnnt":
                loss = tt.rnnt_loss(x, labels, 0)
            else:
                loss = tt.tdt_loss(x, w, labels, 0, DURATIONS)
        d_x, d_w = tape.gradient(loss, [x, w])
        extra = 0.0 if d_w is None else d_w[0, 0, 0, 0]
        return loss + d_x[0, 0, 0, 0] + extra

    step = tf.function(step, jit_compile=impl == "tdt_xla")
    _harness.serve_measuring_memory(tf, lambda: step(tokens, durs).numpy())


def main(argv):
    del argv
    if WORKER.value:
        impl, *dims = WORKER.value.split(",")
        serve(impl, *map(int, dims))
        return
    impls = [i for i in IMPLS if XLA.value or i != "tdt_xla"]
    commands = {
        (impl, shape): [
            *_harness.self_command(__spec__),
            "--worker=" + ",".join(map(str, (impl, *shape))),
        ]
        for shape in SHAPES
        for impl in impls
    }
    seconds, reports = _harness.run_interleaved(commands, ROUNDS.value)
    machine = platform.processor() or platform.machine()
    print(
        f"Machine: {machine}, {os.cpu_count()} cores, 2 threads; medians of "
        f"{ROUNDS.value} interleaved rounds; float32, forward + backward; "
        f"K = {len(DURATIONS)}.\n"
    )
    print("| (B, T, U, V) | what | ms | / rnnt_loss | peak memory above logits |")
    print("| --- | --- | --- | --- | --- |")
    for shape in SHAPES:
        B, T, U, V = shape
        logits_bytes = B * T * (U + 1) * V * 4
        for impl in impls:
            key = impl, shape
            print(
                f"| {shape} | {IMPLS[impl]} | {seconds[key] * 1e3:.1f} | "
                f"{seconds[key] / seconds['rnnt', shape]:.2f} | "
                f"{reports[key]['extra_bytes'] / logits_bytes:.2f}x |"
            )


if __name__ == "__main__":
    app.run(main)
