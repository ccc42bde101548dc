# SPDX-License-Identifier: Apache-2.0
"""Benchmark of RecognitionLattice: loss + gradient, and shortest path.

Configuration of issue 8: B=4, T=20 frames (F=128), vocabulary 26,
FullNGram context 2 (703 states), FrameDependent alignment,
SharedRNNCacher(rnn_size=128, rnn_embedding_size=64) + JointWeightFn
(hidden 128), globally normalised (the denominator over all 703 x 27 arcs
per frame is computed); labels of 8 symbols. 2 threads, float32.

Side by side (benchmarks/_harness.py), one worker process per case:

  * tt_loss: tf.function of the loss and its gradient with respect to every
    weight (the denominator's gradient from forward-backward marginals), with
    RecognitionLattice(frame_by_frame=False): the weights of all frames at
    once;
  * tt_loss_xla: the same, jit_compile=True;
  * tt_loss_autodiff: the same loss with the denominator differentiated
    through the time loop instead (what the marginals avoid);
  * tt_loss_by_frame: frame_by_frame=True (the default): the denominator's
    weights one frame at a time, recomputed in the backward pass; and both
    at T=200 (tt_loss_long, tt_loss_by_frame_long) for the memory of long
    inputs;
  * tt_shortest / tt_shortest_xla: shortest_path;
  * last_loss / last_shortest: Google's LAST (JAX, jax.jit), when
    --last_python names a Python with last-asr, jax and flax installed
    (a separate environment: they do not share one with TensorFlow).

Usage: python -m benchmarks.bench_lattice [--rounds 10]
         [--last_python /path/to/venv/bin/python]
"""

import os
import platform

from absl import app
from absl import flags

from benchmarks import _harness  # noqa: E402
from benchmarks.lattice_case import CONTEXT  # noqa: E402
from benchmarks.lattice_case import HIDDEN  # noqa: E402
from benchmarks.lattice_case import RNN  # noqa: E402
from benchmarks.lattice_case import RNN_EMB  # noqa: E402
from benchmarks.lattice_case import B  # noqa: E402
from benchmarks.lattice_case import F  # noqa: E402
from benchmarks.lattice_case import T  # noqa: E402
from benchmarks.lattice_case import U  # noqa: E402
from benchmarks.lattice_case import V  # noqa: E402
from benchmarks.lattice_case import inputs  # noqa: E402

ROUNDS = flags.DEFINE_integer("rounds", 10, "Timings per case.", lower_bound=3)
LAST_PYTHON = flags.DEFINE_string("last_python", "", "A Python with last-asr.")
WORKER = flags.DEFINE_string("worker", None, "Internal: the case to serve.")

LONG_T = 200  # for the memory of long inputs
CASES = {
    "tt_loss": "tf_transducer loss + gradient (marginals)",
    "tt_loss_xla": "tf_transducer loss + gradient, XLA",
    "tt_loss_autodiff": "tf_transducer loss + gradient through the loop",
    "tt_loss_by_frame": "tf_transducer loss + gradient, frame_by_frame=True",
    "tt_loss_long": f"tf_transducer loss + gradient, T={LONG_T}",
    "tt_loss_by_frame_long": f"tf_transducer loss + gradient, by frame, T={LONG_T}",
    "tt_shortest": "tf_transducer shortest_path",
    "tt_shortest_xla": "tf_transducer shortest_path, XLA",
    "last_loss": "LAST loss + gradient (jax.jit)",
    "last_shortest": "LAST shortest_path (jax.jit)",
}


def serve_tf(case):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["TF_CPU_ALLOCATOR_USE_BFC"] = "true"
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(2)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    from tf_transducer.lattice import RecognitionLattice
    from tf_transducer.lattice.alignments import FrameDependent
    from tf_transducer.lattice.contexts import FullNGram
    from tf_transducer.lattice.semirings import Log
    from tf_transducer.lattice.weight_fns import JointWeightFn
    from tf_transducer.lattice.weight_fns import SharedRNNCacher

    lattice = RecognitionLattice(
        FullNGram(V, CONTEXT),
        FrameDependent(),
        SharedRNNCacher(V, CONTEXT, RNN, RNN_EMB),
        JointWeightFn(V, HIDDEN),
        frame_by_frame="by_frame" in case,
    )
    steps = LONG_T if case.endswith("_long") else T
    frames, num_frames, labels, num_labels = [tf.constant(x) for x in inputs(steps)]
    lattice(frames, num_frames, labels, num_labels)  # builds the weights
    variables = lattice.trainable_variables
    xla = case.endswith("_xla")

    if case.startswith("tt_loss"):
        autodiff = case == "tt_loss_autodiff"

        @tf.function(jit_compile=xla)
        def step():
            with tf.GradientTape() as tape:
                if autodiff:
                    loss = lattice.forward(frames, num_frames, Log) - (
                        lattice.string_forward(frames, num_frames, labels, num_labels)
                    )
                else:
                    loss = lattice(frames, num_frames, labels, num_labels)
                total = tf.reduce_sum(loss)
            grads = tape.gradient(total, variables)
            return total, [tf.convert_to_tensor(g) for g in grads]

    else:

        @tf.function(jit_compile=xla)
        def step():
            return lattice.shortest_path(frames, num_frames)

    def run():
        tf.nest.map_structure(lambda t: t.numpy(), step())

    def report():
        info = tf.config.experimental.get_memory_info("CPU:0")
        return {"peak_tensor_bytes": info["peak"]}

    _harness.serve(run, report=report)


def main(argv):
    del argv
    if WORKER.value:
        return serve_tf(WORKER.value)
    commands = {
        case: [*_harness.self_command(__spec__), f"--worker={case}"]
        for case in CASES
        if case.startswith("tt_")
    }
    if LAST_PYTHON.value:
        last = "benchmarks.last_lattice_worker"
        for case in ("last_loss", "last_shortest"):
            commands[case] = [LAST_PYTHON.value, "-m", last, case.split("_")[1]]
    medians, reports = _harness.run_interleaved(commands, ROUNDS.value)
    print(
        f"# {platform.processor() or platform.machine()}, 2 threads, "
        f"rounds={ROUNDS.value}"
    )
    print(f"# B={B} T={T} F={F} U={U} V={V} FullNGram({V}, {CONTEXT}), FrameDependent")
    for case, seconds in medians.items():
        extra = reports[case].get("peak_tensor_bytes")
        memory = f", peak tensors {extra / 2**20:.1f} MiB" if extra else ""
        print(f"{case:18s} {seconds * 1e3:9.2f} ms  {CASES[case]}{memory}")
    pairs = [
        ("tt_loss_autodiff", "tt_loss"),
        ("tt_loss_by_frame", "tt_loss"),
        ("tt_loss_by_frame_long", "tt_loss_long"),
        ("tt_loss", "tt_loss_xla"),
        ("tt_shortest", "tt_shortest_xla"),
        ("tt_loss", "last_loss"),
        ("tt_loss_xla", "last_loss"),
        ("tt_shortest", "last_shortest"),
        ("tt_shortest_xla", "last_shortest"),
    ]
    for a, b in pairs:
        if a in medians and b in medians:
            print(f"{a} / {b}: {medians[a] / medians[b]:.2f}x")
    for a, b in (
        ("tt_loss_autodiff", "tt_loss"),
        ("tt_loss_by_frame", "tt_loss"),
        ("tt_loss_by_frame_long", "tt_loss_long"),
    ):
        ratio = reports[a]["peak_tensor_bytes"] / reports[b]["peak_tensor_bytes"]
        print(f"peak tensor memory, {a} / {b}: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    app.run(main)
