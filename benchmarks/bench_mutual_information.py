# SPDX-License-Identifier: Apache-2.0
"""Benchmark of the MI recursion: forward + backward, float32.

Each configuration lives in its own interpreter and all are timed in turn,
round after round (benchmarks/_harness.py).  Reported: medians over the
rounds, and

  * the C++ op vs the pure-TF path, at B=8, S=60, T=300;
  * the op with 1 vs 2 threads, at that size and for one long sequence
    (the kernel's wavefront schedule);
  * how the op's time grows when B * S * T grows 4x (B x4, or S and T x2).

One timing is one `tf.function` call doing --inner passes, one after the
other, of scores plus the gradients of their sum with respect to px and py,
divided by --inner.  "threads" sets both of TensorFlow's
thread counts.  "op alone" is one call of the op with return_grad=True,
which computes the gradients in the same kernel; the others differentiate
with a GradientTape.

Usage: python -m benchmarks.bench_mutual_information [--rounds 30]
"""

import os
import platform

from absl import app
from absl import flags

from benchmarks import _harness  # noqa: E402

ROUNDS = flags.DEFINE_integer("rounds", 30, "Timings per configuration.", lower_bound=3)
INNER = flags.DEFINE_integer(
    "inner", 10, "fwd + bwd passes per timed graph call.", lower_bound=1
)
WORKER = flags.DEFINE_string(
    "worker", None, "Internal: serve timings of one case, 'impl,threads,B,S,T'."
)

BASE = (8, 60, 300)
LONG_ONE = (1, 1000, 1000)
CASES = [
    ("op", 2, BASE),
    ("tf", 2, BASE),
    ("op", 1, BASE),
    ("kernel", 1, BASE),
    ("kernel", 2, BASE),
    ("op", 1, LONG_ONE),
    ("op", 2, LONG_ONE),
    ("op", 2, (32, 60, 300)),
    ("op", 2, (8, 120, 600)),
]


def serve(impl, threads, B, S, T):
    """Worker: prints "ready", then one timing (seconds) per input line."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    import tf_transducer as tt

    fn = {
        "op": tt.mutual_information_recursion,
        "tf": tt.mutual_information_recursion_tf,
        "kernel": tt.mutual_information_recursion,
    }[impl]
    rng = np.random.default_rng(0)
    px = tf.constant(rng.normal(size=(B, S, T + 1)).astype(np.float32))
    py = tf.constant(rng.normal(size=(B, S + 1, T)).astype(np.float32))

    @tf.function
    def steps(px, py, zero):
        # `+ zero * total`, with zero fed at run time, keeps the passes apart
        # and in sequence (one pass at a time, as in training).
        total = tf.zeros([], px.dtype)
        for _ in range(INNER.value):
            if impl == "kernel":  # the op alone: it returns the gradients too
                score, (d_px, d_py) = fn(px + zero * total, py, return_grad=True)
                total += tf.reduce_sum(score) + d_px[0, 0, 0] + d_py[0, 0, 0]
                continue
            with tf.GradientTape() as tape:
                x = px + zero * total
                tape.watch([x, py])
                score = tf.reduce_sum(fn(x, py))
            d_px, d_py = tape.gradient(score, [x, py])
            total += score + d_px[0, 0, 0] + d_py[0, 0, 0]
        return total

    zero = tf.constant(0.0, px.dtype)
    _harness.serve(lambda: steps(px, py, zero).numpy(), inner=INNER.value)


def main(argv):
    del argv
    if WORKER.value:
        impl, *nums = WORKER.value.split(",")
        serve(impl, *map(int, nums))
        return
    commands = {}
    for impl, threads, shape in CASES:
        spec = ",".join(map(str, (impl, threads, *shape)))
        commands[impl, threads, shape] = [
            *_harness.self_command(__spec__),
            f"--worker={spec}",
            f"--inner={INNER.value}",
        ]
    seconds, _ = _harness.run_interleaved(commands, ROUNDS.value)
    ms = {key: value * 1e3 for key, value in seconds.items()}

    machine = platform.processor() or platform.machine()
    print(
        f"Machine: {machine}, {os.cpu_count()} cores; medians of {ROUNDS.value} "
        f"interleaved rounds, {INNER.value} passes each, float32, fwd + bwd.\n"
    )
    names = {
        "op": "op + tape.gradient",
        "tf": "pure TF + tape.gradient",
        "kernel": "op alone (return_grad)",
    }
    print("| what | (B, S, T) | threads | ms per fwd + bwd |")
    print("| --- | --- | --- | --- |")
    for key in CASES:
        impl, threads, shape = key
        print(f"| {names[impl]} | {shape} | {threads} | {ms[key]:.2f} |")

    def ratio(name, slow, fast, goal):
        return name, ms[slow] / ms[fast], goal

    rows = [
        ratio(
            "pure TF / op, (8, 60, 300), 2 threads",
            ("tf", 2, BASE),
            ("op", 2, BASE),
            ">= 20",
        ),
        ratio(
            "op 1 thread / 2 threads, (8, 60, 300)",
            ("op", 1, BASE),
            ("op", 2, BASE),
            ">= 1.6",
        ),
        ratio(
            "op alone 1 thread / 2 threads, (8, 60, 300)",
            ("kernel", 1, BASE),
            ("kernel", 2, BASE),
            ">= 1.6",
        ),
        ratio(
            "op 1 thread / 2 threads, (1, 1000, 1000)",
            ("op", 1, LONG_ONE),
            ("op", 2, LONG_ONE),
            ">= 1.6",
        ),
        ratio(
            "op (32, 60, 300) / (8, 60, 300): B x4",
            ("op", 2, (32, 60, 300)),
            ("op", 2, BASE),
            "<= 4.5",
        ),
        ratio(
            "op (8, 120, 600) / (8, 60, 300): S, T x2",
            ("op", 2, (8, 120, 600)),
            ("op", 2, BASE),
            "<= 4.5",
        ),
    ]
    print("\n| ratio | measured | goal |")
    print("| --- | --- | --- |")
    for name, value, goal in rows:
        print(f"| {name} | {value:.2f} | {goal} |")


if __name__ == "__main__":
    app.run(main)
