# SPDX-License-Identifier: Apache-2.0
"""The joint network fused into the RNN-T (or TDT) loss against joint + loss.

"unfused": the TransducerJoiner's maths in TensorFlow (tanh of the broadcast
sum, the output layer: logits [B, T, U + 1, V]) and `rnnt_loss` on the
logits (the fused C++ loss; TensorFlow's own matmuls, oneDNN on x86).
"fused": `rnnt_loss_joint` on the joint's inputs (the logits never exist).
Both take the same inputs (encoder [B, T, J], predictor [B, U + 1, J],
weight [J, V], bias [V]) and compute the loss and the gradients of all four.
With --loss tdt, the Token-and-Duration Transducer's: the joint has a duration
head too (weight [J, K], bias [K], K = 5 durations [0, 1, 2, 3, 4]);
"unfused" is both heads in TensorFlow and `tdt_loss`, "fused" `tdt_loss_joint`.

Three measurements, each case in its own process:
  time: forward + backward, workers interleaved round by round
    (benchmarks/_harness.py), 2 threads;
  memory: the peak RSS of one step above the RSS before it (the inputs
    exist already), in a fresh process;
  batch under a cap: the largest power-of-two batch whose step's peak RSS
    (the whole process) stays under --cap_gib for the unfused path, then one
    step of the fused path at --batch_factor times that batch.

Usage: python -m benchmarks.bench_joint_loss [--rounds 5] [--cap_gib 6]
  [--loss rnnt|tdt] [--dtypes float32,bfloat16]
"""

import json
import os
import subprocess

from absl import app
from absl import flags

from benchmarks import _harness
from benchmarks import peak_rss

SHAPES = [(8, 150, 40, 500, 256), (4, 300, 80, 1024, 512), (2, 500, 100, 4096, 640)]
DTYPES = ("float32", "bfloat16")
CAP_SHAPE = (300, 80, 1024, 512)  # (T, U, V, J) of the batch-under-a-cap test

ROUNDS = flags.DEFINE_integer("rounds", 5, "Timing rounds (the median is kept).")
CAP_GIB = flags.DEFINE_float("cap_gib", 6.0, "Memory cap of the batch test, GiB.")
FACTOR = flags.DEFINE_integer("batch_factor", 8, "Fused batch = this x unfused.")
SKIP_TIME = flags.DEFINE_bool("skip_time", False, "Only memory and the cap test.")
LOSS = flags.DEFINE_enum("loss", "rnnt", ["rnnt", "tdt"], "The loss of the joint.")
DTYPE_LIST = flags.DEFINE_list("dtypes", list(DTYPES), "The inputs' dtypes.")
WORKER = flags.DEFINE_string(
    "worker", None, "Internal: 'mode,loss,impl,dtype,B,T,U,V,J'."
)
DURATIONS = [0, 1, 2, 3, 4]


def make_step(impl, dtype, B, T, U, V, J):
    """(step, inputs): step(*inputs) runs forward + backward and blocks."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    from tf_transducer.ops.rnnt import rnnt_loss
    from tf_transducer.ops.rnnt_joint import rnnt_loss_joint
    from tf_transducer.ops.tdt import tdt_loss
    from tf_transducer.ops.tdt_joint import tdt_loss_joint

    tf.config.threading.set_intra_op_parallelism_threads(2)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    dt = tf.as_dtype(dtype)

    def normal(shape, seed, scale=1.0):
        x = tf.random.stateless_normal(shape, seed=[seed, 0]) * scale
        return tf.cast(x, dt)

    inputs = [
        normal((B, T, J), 1),
        normal((B, U + 1, J), 2),
        normal((J, V), 3, J**-0.5),
        normal((V,), 4, 0.1),
    ]
    labels = tf.random.stateless_uniform((B, U), [5, 0], 1, V, tf.int64)
    if LOSS.value == "tdt":
        K = len(DURATIONS)
        inputs += [normal((J, K), 6, J**-0.5), normal((K,), 7, 0.1)]

    def loss_of(encoder, predictor, weight, bias, *duration_head):
        if impl == "fused" and duration_head:
            return tdt_loss_joint(encoder, predictor, weight, bias, *duration_head,
                                  labels, 0, DURATIONS)  # fmt: skip
        if impl == "fused":
            return rnnt_loss_joint(encoder, predictor, weight, bias, labels, 0)
        hidden = tf.tanh(encoder[:, :, None] + predictor[:, None])
        logits = tf.tensordot(hidden, weight, 1) + bias
        if duration_head:
            durations = tf.tensordot(hidden, duration_head[0], 1) + duration_head[1]
            return tdt_loss(logits, durations, labels, 0, DURATIONS)
        return rnnt_loss(logits, labels, 0)

    @tf.function
    def step(*xs):
        with tf.GradientTape() as tape:
            tape.watch(xs)
            loss = loss_of(*xs)
        return loss, tape.gradient(loss, xs)

    def run():
        loss, grads = step(*inputs)
        float(loss)  # blocks until the step is done
        return grads

    return run, inputs


def peak_of_step(impl, dtype, dims):
    """(peak RSS of one step above the RSS before it, the process's peak)."""
    run, _ = make_step(impl, dtype, *dims)
    small, _ = make_step(impl, dtype, 1, 3, 2, 5, 4)
    small()  # loads the kernels and traces
    before = peak_rss.start()
    run()
    return peak_rss.peak_above(before), peak_rss.status_bytes("VmHWM:")


def worker(spec):
    mode, loss, impl, dtype, *dims = spec.split(",")
    flags.FLAGS.loss = loss
    dims = [int(d) for d in dims]
    if mode == "time":
        run, _ = make_step(impl, dtype, *dims)
        _harness.serve(run)
        return
    above, total = peak_of_step(impl, dtype, dims)
    print(json.dumps({"above": above, "total": total}))


def child(spec):
    """A worker's JSON report, or None when it died (out of memory)."""
    result = subprocess.run(
        [*_harness.self_command(__spec__), f"--worker={spec}"],
        capture_output=True,
        text=True,
        cwd=_harness.ROOT,
    )
    if result.returncode != 0:
        return None
    return json.loads(result.stdout.strip().splitlines()[-1])


def timings():
    print("| (B, T, U, V, J) | dtype | unfused s | fused s | fused / unfused |")
    print("| --- | --- | --- | --- | --- |")
    for shape in SHAPES:
        for dtype in DTYPE_LIST.value:
            spec = ",".join(map(str, shape))
            medians, _ = _harness.run_interleaved(
                {
                    impl: [
                        *_harness.self_command(__spec__),
                        f"--worker=time,{LOSS.value},{impl},{dtype},{spec}",
                    ]
                    for impl in ("unfused", "fused")
                },
                ROUNDS.value,
            )
            u, f = medians["unfused"], medians["fused"]
            print(f"| {shape} | {dtype} | {u:.3f} | {f:.3f} | {f / u:.2f}x |")


def memory():
    print("| (B, T, U, V, J) | dtype | unfused MiB | fused MiB | fused / unfused |")
    print("| --- | --- | --- | --- | --- |")
    for shape in SHAPES:
        for dtype in DTYPE_LIST.value:
            spec = ",".join(map(str, shape))
            peaks = {
                impl: child(f"memory,{LOSS.value},{impl},{dtype},{spec}")
                for impl in ("unfused", "fused")
            }
            u, f = (peaks[k]["above"] / 2**20 for k in ("unfused", "fused"))
            print(f"| {shape} | {dtype} | {u:.0f} | {f:.1f} | {f / u:.4f}x |")


def batch_under_cap():
    cap = CAP_GIB.value * 2**30
    dims = ",".join(map(str, CAP_SHAPE))

    def fits(impl, batch):
        report = child(f"memory,{LOSS.value},{impl},float32,{batch},{dims}")
        return report is not None and report["total"] <= cap, report

    batch = 1
    while fits("unfused", batch * 2)[0]:
        batch *= 2
    ok, report = fits("fused", batch * FACTOR.value)
    total = "died" if report is None else f"{report['total'] / 2**30:.2f} GiB"
    print(
        f"(T, U, V, J) = {CAP_SHAPE}, float32, cap {CAP_GIB.value:g} GiB (the "
        f"process's peak RSS): unfused fits B = {batch} (powers of two); fused at "
        f"B = {batch * FACTOR.value} ({FACTOR.value}x): "
        f"{'fits' if ok else 'does not fit'}, peak {total}"
    )


def main(argv):
    del argv
    if WORKER.value:
        worker(WORKER.value)
        return
    if not SKIP_TIME.value:
        timings()
    memory()
    batch_under_cap()


if __name__ == "__main__":
    app.run(main)
