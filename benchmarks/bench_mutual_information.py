"""Benchmark of the MI recursion: forward + backward, float32.

Each configuration runs in its own interpreter (the thread count of a
TensorFlow process is fixed when it starts), all from one invocation, and the
ratios are printed as a markdown table for benchmarks/BENCHMARKS.md:

  * the C++ op vs the pure-TF path, at B=8, S=60, T=300;
  * the op with 1 vs 2 intra-op threads, at that size and for one long
    sequence (the kernel's wavefront schedule);
  * how the op's time grows when B * S * T grows 4x (B x4, or S and T x2).

Times are medians of --repeats runs after warm-up; each run is one
`tf.function` call doing --inner passes of scores + gradients of their sum
with respect to px and py, and counts as its time / --inner.

Usage: python benchmarks/bench_mutual_information.py [--repeats 30]
"""

import json
import os
import platform
import subprocess
import sys
import time

from absl import app, flags

REPEATS = flags.DEFINE_integer("repeats", 30, "Timed runs per case.", lower_bound=3)
INNER = flags.DEFINE_integer(
    "inner", 10, "fwd + bwd passes per timed graph call.", lower_bound=1
)
WORKER = flags.DEFINE_string(
    "worker", None, "Internal: run one case, 'impl,threads,B,S,T'."
)


def run_case(impl, threads, B, S, T, repeats):
    """Median seconds of fwd + bwd, in this (fresh) process."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    import tf_transducer as tt

    fn = {
        "op": tt.mutual_information_recursion,
        "tf": tt.mutual_information_recursion_tf,
    }[impl]
    rng = np.random.default_rng(0)
    px = tf.constant(rng.normal(size=(B, S, T + 1)).astype(np.float32))
    py = tf.constant(rng.normal(size=(B, S + 1, T)).astype(np.float32))

    @tf.function
    def steps(px, py, n):
        # n fwd + bwd passes in one graph call, so that Python's per-call
        # overhead (the same for both paths) does not blur the ratio.  The
        # `+ 0 * i` keeps TensorFlow from hoisting the work out of the loop.
        total = tf.zeros([], px.dtype)
        for i in tf.range(n):
            with tf.GradientTape() as tape:
                x = px + tf.cast(i, px.dtype) * 0
                tape.watch([x, py])
                score = tf.reduce_sum(fn(x, py))
            d_px, d_py = tape.gradient(score, [x, py])
            total += score + d_px[0, 0, 0] + d_py[0, 0, 0]
        return total

    n = tf.constant(INNER.value)
    steps(px, py, n).numpy()  # warm-up and tracing
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        steps(px, py, n).numpy()
        times.append((time.perf_counter() - start) / INNER.value)
    return float(np.median(times))


def measure(impl, threads, B, S, T):
    spec = f"{impl},{threads},{B},{S},{T}"
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            f"--worker={spec}",
            f"--repeats={REPEATS.value}",
            f"--inner={INNER.value}",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    seconds = json.loads(out.strip().splitlines()[-1])["seconds"]
    print(f"  {spec:24s} {seconds * 1e3:9.2f} ms", file=sys.stderr, flush=True)
    return seconds


def main(argv):
    del argv
    if WORKER.value:
        impl, *nums = WORKER.value.split(",")
        threads, B, S, T = map(int, nums)
        print(json.dumps({"seconds": run_case(impl, threads, B, S, T, REPEATS.value)}))
        return
    base = (8, 60, 300)
    long_one = (1, 400, 400)
    ms = {}
    for key in [
        ("op", 2, base),
        ("tf", 2, base),
        ("op", 1, base),
        ("op", 1, long_one),
        ("op", 2, long_one),
        ("op", 2, (32, 60, 300)),
        ("op", 2, (8, 120, 600)),
    ]:
        ms[key] = measure(key[0], key[1], *key[2])
    rows = [
        (
            "pure-TF path / op, (8, 60, 300), 2 threads",
            ms["tf", 2, base] / ms["op", 2, base],
            ">= 20",
        ),
        (
            "op 1 thread / 2 threads, (8, 60, 300)",
            ms["op", 1, base] / ms["op", 2, base],
            ">= 1.6",
        ),
        (
            "op 1 thread / 2 threads, (1, 400, 400)",
            ms["op", 1, long_one] / ms["op", 2, long_one],
            ">= 1.6",
        ),
        (
            "op (32, 60, 300) / (8, 60, 300): B x4",
            ms["op", 2, (32, 60, 300)] / ms["op", 2, base],
            "<= 4.5",
        ),
        (
            "op (8, 120, 600) / (8, 60, 300): S, T x2",
            ms["op", 2, (8, 120, 600)] / ms["op", 2, base],
            "<= 4.5",
        ),
    ]
    print(
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
        f"median of {REPEATS.value} runs after warm-up, float32, fwd + bwd.\n"
    )
    print("| (B, S, T), threads | op (ms) | pure TF (ms) |")
    print("| --- | --- | --- |")
    for (impl, threads, shape), sec in ms.items():
        if impl == "op":
            tf_ms = ms.get(("tf", threads, shape))
            tf_cell = f"{tf_ms * 1e3:.2f}" if tf_ms else ""
            print(f"| {shape}, {threads} | {sec * 1e3:.2f} | {tf_cell} |")
    print("\n| ratio | measured | goal |")
    print("| --- | --- | --- |")
    for name, value, goal in rows:
        print(f"| {name} | {value:.2f} | {goal} |")


if __name__ == "__main__":
    app.run(main)
