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

The fused path's CPU matrix products take the best instruction path the
CPU runs (`tf_transducer.ops.cpu_gemm_paths`); --gemm_paths times the fused
step on each path named (TF_TRANSDUCER_CPU_GEMM), and --baseline_library
with another build of the op library, beside the same unfused step. The
CPU's name and flags are printed first.

Usage: python -m benchmarks.bench_joint_loss [--rounds 5] [--cap_gib 6]
  [--loss rnnt|tdt] [--dtypes float32,bfloat16] [--gemm_paths avx2,avx512]
  [--baseline_library OLD/_ops.so] [--noshow_memory]
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
SHAPE_LIST = flags.DEFINE_list(
    "shapes", [str(i) for i in range(len(SHAPES))], "Indices into SHAPES to run."
)
GEMM_PATHS = flags.DEFINE_list(
    "gemm_paths", [], "Time the fused step on each of these CPU product paths "
    "(default: the best one the CPU runs)."
)  # fmt: skip
BASELINE = flags.DEFINE_string(
    "baseline_library", None, "Also time the fused step with this build of "
    "_ops.so (TF_TRANSDUCER_OPS_LIBRARY; e.g. an older commit's)."
)  # fmt: skip
SHOW_MEMORY = flags.DEFINE_bool(
    "show_memory", True, "After the times, the memory and the batch-cap tests."
)
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


def cpu_description():
    """The CPU's model name, its matrix-relevant flags and the product paths."""
    from tf_transducer.ops import cpu_gemm_paths

    name, found = "unknown CPU", []
    wanted = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16",
              "avx512_fp16", "amx_tile", "amx_bf16", "amx_fp16")  # fmt: skip
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    name = value.strip()
                if key.strip() == "flags":
                    found = [x for x in wanted if x in value.split()]
                    break
    except OSError:
        pass
    paths = cpu_gemm_paths()
    shown = " ".join(found) or "none of " + " ".join(wanted)
    supported = ", ".join(paths.supported)
    return (f"CPU: {name}; flags: {shown}; product paths: {supported} "
            f"(default {paths.active})")  # fmt: skip


def timings():
    paths = GEMM_PATHS.value or [None]
    variants = {p: [] if p is None else [f"TF_TRANSDUCER_CPU_GEMM={p}"] for p in paths}
    if BASELINE.value:
        variants["baseline"] = [f"TF_TRANSDUCER_OPS_LIBRARY={BASELINE.value}"]
    print("| (B, T, U, V, J) | dtype | path | unfused s | fused s | fused / unfused |")
    print("| --- | --- | --- | --- | --- | --- |")
    for shape in (SHAPES[int(i)] for i in SHAPE_LIST.value):
        for dtype in DTYPE_LIST.value:
            spec = ",".join(map(str, shape))
            commands = {
                "unfused": [*_harness.self_command(__spec__),
                            f"--worker=time,{LOSS.value},unfused,{dtype},{spec}"]
            }  # fmt: skip
            for path, env in variants.items():
                worker = f"--worker=time,{LOSS.value},fused,{dtype},{spec}"
                command = [*_harness.self_command(__spec__), worker]
                commands[path] = ["env", *env, *command] if env else command
            medians, _ = _harness.run_interleaved(commands, ROUNDS.value)
            u = medians["unfused"]
            for path in variants:
                f = medians[path]
                row = (shape, dtype, path or "default", f"{u:.3f}", f"{f:.3f}")
                print(f"| {' | '.join(map(str, row))} | {f / u:.2f}x |")


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
    print(cpu_description(), flush=True)
    if not SKIP_TIME.value:
        timings()
    if SHOW_MEMORY.value:
        memory()
        batch_under_cap()


if __name__ == "__main__":
    app.run(main)
