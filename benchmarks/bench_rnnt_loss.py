"""Benchmark of the fused RNN-T loss: forward + backward, float32, 2 threads.

Side by side (benchmarks/_harness.py), at (B, T, U, V) = (8, 150, 40, 500)
and (4, 300, 80, 128), logits [B, T, U + 1, V]:

  * tt.rnnt_loss (the fused op) + its gradient;
  * the yardstick: tf.nn.log_softmax forward + backward on the same logits
    (memory-bound: every logit read, exponentiated and written);
  * a pure-TF RNN-T loss of the kind TF projects use today
    (benchmarks/pure_tf_rnnt.py: log_softmax + one_hot + while_loop).

Also the peak of TensorFlow's tensor memory during a step above what is held
before it (the logits), as a multiple of the logits' size: the gradient
alone is 1.0x.

Usage: python benchmarks/bench_rnnt_loss.py [--rounds 10]
"""

import os
import platform
import sys

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness  # noqa: E402

ROUNDS = flags.DEFINE_integer("rounds", 10, "Timings per configuration.", lower_bound=3)
WORKER = flags.DEFINE_string("worker", None, "Internal: 'impl,B,T,U,V'.")

SHAPES = [(8, 150, 40, 500), (4, 300, 80, 128)]
IMPLS = {
    "fused": "tt.rnnt_loss (fused op)",
    "yardstick": "tf.nn.log_softmax fwd + bwd",
    "pure_tf": "pure-TF RNN-T loss",
}


def serve(impl, B, T, U, V):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # TensorFlow's BFC allocator on the CPU keeps exact byte counts of all
    # tensors, current and peak (the default allocator keeps none).
    os.environ["TF_CPU_ALLOCATOR_USE_BFC"] = "true"
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(2)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    from pure_tf_rnnt import pure_tf_rnnt_loss

    import tf_transducer as tt

    logits = tf.random.stateless_normal((B, T, U + 1, V), seed=[0, 0])
    labels = tf.constant(np.random.default_rng(0).integers(1, V, size=(B, U)))
    loss_fn = {
        "fused": lambda x: tt.rnnt_loss(x, labels, 0),
        "yardstick": lambda x: tf.reduce_mean(tf.nn.log_softmax(x)[..., 0]),
        "pure_tf": lambda x: pure_tf_rnnt_loss(x, labels, 0),
    }[impl]

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = loss_fn(x)
        grad = tape.gradient(loss, x)
        return loss + grad[0, 0, 0, 0]

    step(logits).numpy()  # trace before measuring memory
    base = tf.config.experimental.get_memory_info("CPU:0")["current"]
    tf.config.experimental.reset_memory_stats("CPU:0")

    def report():
        peak = tf.config.experimental.get_memory_info("CPU:0")["peak"]
        return {"extra_bytes": peak - base}

    _harness.serve(lambda: step(logits).numpy(), report=report)


def main(argv):
    del argv
    if WORKER.value:
        impl, *dims = WORKER.value.split(",")
        serve(impl, *map(int, dims))
        return
    commands = {
        (impl, shape): [
            sys.executable,
            __file__,
            "--worker=" + ",".join(map(str, (impl, *shape))),
        ]
        for shape in SHAPES
        for impl in IMPLS
    }
    seconds, reports = _harness.run_interleaved(commands, ROUNDS.value)
    machine = platform.processor() or platform.machine()
    print(
        f"Machine: {machine}, {os.cpu_count()} cores, 2 threads; medians of "
        f"{ROUNDS.value} interleaved rounds; float32, forward + backward.\n"
    )
    print("| (B, T, U, V) | what | ms | / yardstick | peak memory above logits |")
    print("| --- | --- | --- | --- | --- |")
    for shape in SHAPES:
        B, T, U, V = shape
        logits_bytes = B * T * (U + 1) * V * 4
        yard = seconds["yardstick", shape]
        for impl, name in IMPLS.items():
            key = impl, shape
            extra = reports[key]["extra_bytes"] / logits_bytes
            print(
                f"| {shape} | {name} | {seconds[key] * 1e3:.1f} | "
                f"{seconds[key] / yard:.2f} | {extra:.2f}x |"
            )


if __name__ == "__main__":
    app.run(main)
