"""Benchmark of the MI recursion: forward + backward, float32.

Each configuration lives in its own interpreter (a TensorFlow process fixes
its thread counts when it starts).  All of them start first; then the parent
asks them for one timing each, in turn, round after round, so that the
configurations are measured side by side and a change in the machine's load
hits them all alike.  Reported: medians over the rounds, and

  * the C++ op vs the pure-TF path, at B=8, S=60, T=300;
  * the op with 1 vs 2 threads, at that size and for one long sequence
    (the kernel's wavefront schedule);
  * how the op's time grows when B * S * T grows 4x (B x4, or S and T x2).

One timing is the median of three `tf.function` calls, after 0.1 s of the
same calls to keep the cores awake; each call does --inner passes, one after
the other, of scores plus the gradients of their sum with respect to px and
py, and counts as its time / --inner.  "threads" sets both of TensorFlow's
thread counts.  "op alone" is one call of the op with return_grad=True,
which computes the gradients in the same kernel; the others differentiate
with a GradientTape.

Usage: python benchmarks/bench_mutual_information.py [--rounds 30]
"""

import os
import platform
import subprocess
import sys
import time

from absl import app, flags

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
    for _ in range(3):  # tracing and warm-up
        steps(px, py, zero).numpy()
    print("ready", flush=True)
    for _ in sys.stdin:
        # Keep the cores busy for a while first: on a virtual machine an idle
        # core sleeps, and waking it costs more than the work being timed.
        until = time.perf_counter() + 0.1
        while time.perf_counter() < until:
            steps(px, py, zero).numpy()
        times = []
        for _ in range(3):
            start = time.perf_counter()
            steps(px, py, zero).numpy()
            times.append((time.perf_counter() - start) / INNER.value)
        print(sorted(times)[1], flush=True)


def main(argv):
    del argv
    if WORKER.value:
        impl, *nums = WORKER.value.split(",")
        serve(impl, *map(int, nums))
        return
    workers = {}
    for impl, threads, shape in CASES:
        spec = ",".join(map(str, (impl, threads, *shape)))
        workers[impl, threads, shape] = subprocess.Popen(
            [sys.executable, __file__, f"--worker={spec}", f"--inner={INNER.value}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
    for proc in workers.values():
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError("a benchmark worker failed to start")
    samples = {key: [] for key in workers}
    for _ in range(ROUNDS.value):
        for key, proc in workers.items():
            proc.stdin.write("run\n")
            proc.stdin.flush()
            samples[key].append(float(proc.stdout.readline()))
    for proc in workers.values():
        proc.stdin.close()
        proc.wait()
    ms = {key: sorted(v)[len(v) // 2] * 1e3 for key, v in samples.items()}

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
