# SPDX-License-Identifier: Apache-2.0
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

Then the pruned recipe (simple loss with return_grad, get_rnnt_prune_ranges,
do_rnnt_pruning, rnnt_loss_pruned; s_range 5) against the fused full loss,
both on an additive joiner (logits = am + lm), at (8, 300, 60, 500): time and
peak memory of a step (forward + gradients with respect to am and lm). The
pruned joiner input is lm gathered at the ranges plus am broadcast over them
(not am copied s_range times), which is what PrunedRnntLoss does.

Usage: python -m benchmarks.bench_rnnt_loss [--rounds 10]
"""

import os
import platform

from absl import app
from absl import flags

from benchmarks import _harness  # noqa: E402
from benchmarks.rnnt_cases import IMPLS  # noqa: E402
from benchmarks.rnnt_cases import SHAPES  # noqa: E402
from benchmarks.rnnt_cases import loss_function  # noqa: E402

ROUNDS = flags.DEFINE_integer("rounds", 10, "Timings per configuration.", lower_bound=3)
WORKER = flags.DEFINE_string("worker", None, "Internal: 'impl,B,T,U,V'.")

# The pruned recipe against the full loss, both on an additive joiner
# (logits = am + lm), s_range = 5.
PRUNED_SHAPE = (8, 300, 60, 500)
PRUNED_IMPLS = {
    "full_additive": "tt.rnnt_loss on am + lm (full logits)",
    "pruned_additive": "simple + ranges + pruning + rnnt_loss_pruned",
}
S_RANGE = 5


def serve(impl, B, T, U, V):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # TensorFlow's BFC allocator on the CPU keeps exact byte counts of all
    # tensors, current and peak (the default allocator keeps none).
    os.environ["TF_CPU_ALLOCATOR_USE_BFC"] = "true"
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(2)
    tf.config.threading.set_inter_op_parallelism_threads(2)

    import tf_transducer as tt

    labels = tf.constant(np.random.default_rng(0).integers(1, V, size=(B, U)))
    if impl.endswith("_additive"):
        step = _additive_step(tf, tt, impl, B, T, U, V, labels)
        _harness.serve_measuring_memory(tf, lambda: step().numpy())
        return
    logits = tf.random.stateless_normal((B, T, U + 1, V), seed=[0, 0])
    loss_fn = loss_function(impl, labels)

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = loss_fn(x)
        grad = tape.gradient(loss, x)
        return loss + grad[0, 0, 0, 0]

    _harness.serve_measuring_memory(tf, lambda: step(logits).numpy())


def _additive_step(tf, tt, impl, B, T, U, V, labels):
    """fwd + bwd w.r.t. am [B, T, V] and lm [B, U + 1, V] of either recipe."""
    am = tf.random.stateless_normal((B, T, V), seed=[1, 0])
    lm = tf.random.stateless_normal((B, U + 1, V), seed=[2, 0])

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            tape.watch([am, lm])
            if impl == "full_additive":
                loss = tt.rnnt_loss(am[:, :, None, :] + lm[:, None, :, :], labels, 0)
            else:
                simple, (px_grad, py_grad) = tt.rnnt_loss_simple(
                    lm, am, labels, 0, return_grad=True
                )
                boundary = tf.tile([[0, 0, U, T]], [B, 1])
                ranges = tt.get_rnnt_prune_ranges(px_grad, py_grad, boundary, S_RANGE)
                # do_rnnt_pruning's lm_pruned; am broadcast, not copied s_range
                # times (as PrunedRnntLoss hands them to the joiner).
                lm_p = tf.gather(lm, ranges, axis=1, batch_dims=1)
                logits = am[:, :, None, :] + lm_p
                pruned = tt.rnnt_loss_pruned(logits, labels, ranges, 0, boundary)
                loss = 0.5 * simple + pruned
        d_am, d_lm = tape.gradient(loss, [am, lm])
        return loss + d_am[0, 0, 0] + d_lm[0, 0, 0]

    return step


def main(argv):
    del argv
    if WORKER.value:
        impl, *dims = WORKER.value.split(",")
        serve(impl, *map(int, dims))
        return
    cases = [(impl, shape) for shape in SHAPES for impl in IMPLS]
    cases += [(impl, PRUNED_SHAPE) for impl in PRUNED_IMPLS]
    commands = {
        (impl, shape): [
            *_harness.self_command(__spec__),
            "--worker=" + ",".join(map(str, (impl, *shape))),
        ]
        for impl, shape in cases
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
    print("\n| (B, T, U, V) | pure-TF RNN-T loss / fused op |")
    print("| --- | --- |")
    for shape in SHAPES:
        ratio = seconds["pure_tf", shape] / seconds["fused", shape]
        print(f"| {shape} | {ratio:.1f} |")
    B, T, U, V = PRUNED_SHAPE
    full = ("full_additive", PRUNED_SHAPE)
    print(f"\nPruned recipe at (B, T, U, V) = {PRUNED_SHAPE}, s_range {S_RANGE}:\n")
    print("| what | ms | / full | peak memory / full's |")
    print("| --- | --- | --- | --- |")
    for impl, name in PRUNED_IMPLS.items():
        key = impl, PRUNED_SHAPE
        memory = reports[key]["extra_bytes"] / reports[full]["extra_bytes"]
        print(
            f"| {name} | {seconds[key] * 1e3:.1f} | "
            f"{seconds[key] / seconds[full]:.2f} | {memory:.2f} |"
        )


if __name__ == "__main__":
    app.run(main)
