# SPDX-License-Identifier: Apache-2.0
"""DeepSpeech at its default size (n_hidden 2048, 47.2 M parameters).

  * TFLite sizes of the streaming export (float and dynamic-range quantised);
  * real-time factor of the quantised streaming runner on one thread (the
    process pinned to one core): seconds of compute per second of audio, on
    10 s of audio fed in 320 ms chunks, median of 3;
  * training steps per second at batch 16 of 5-second utterances (250 MFCC
    frames), 2 threads, forward + CTC + backward + Adam, median of 5 after 2.

Usage: python -m benchmarks.bench_deepspeech
"""

import os
import statistics
import subprocess
import tempfile
import time

from absl import app
from absl import flags

from benchmarks import _harness

WORKER = flags.DEFINE_string("worker", None, "Internal: 'rtf,DIR' or 'train'.")


def rtf(export_dir):
    os.sched_setaffinity(0, {0})
    _harness.tensorflow_with_threads(1)
    import numpy as np

    from tf_transducer.export import DeepSpeechStream

    stream = DeepSpeechStream(export_dir, quantization="dynamic", num_threads=1)
    audio = (np.random.default_rng(0).normal(size=16000 * 10) * 0.1).astype(np.float32)
    stream.transcribe(audio[:16000], chunk_samples=5120)  # warm-up
    times = []
    for _ in range(3):
        start = time.perf_counter()
        stream.transcribe(audio, chunk_samples=5120)
        times.append((time.perf_counter() - start) / 10.0)
    print(statistics.median(times))


def train_steps():
    tf = _harness.tensorflow_with_threads(2)
    import keras

    from tf_transducer.losses import CtcLoss
    from tf_transducer.models import DeepSpeech

    model = DeepSpeech()
    model.build()
    optimizer = keras.optimizers.Adam(0.001)
    loss_fn = CtcLoss()
    x = tf.random.stateless_normal([16, 250, 26], [1, 2])
    lengths = tf.fill([16], 250)
    labels = tf.random.stateless_uniform([16, 60], [3, 4], 1, 29, tf.int32)

    @tf.function(jit_compile=False)
    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model((x, lengths), training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    times = []
    for i in range(7):
        start = time.perf_counter()
        step().numpy()
        if i >= 2:
            times.append(time.perf_counter() - start)
    print(1.0 / statistics.median(times))


def main(argv):
    del argv
    if WORKER.value:
        what, *rest = WORKER.value.split(",")
        rtf(rest[0]) if what == "rtf" else train_steps()
        return
    _harness.tensorflow_with_threads(2)
    from tf_transducer.data import CharacterAlphabet
    from tf_transducer.export import export_deepspeech
    from tf_transducer.models import DeepSpeech

    model = DeepSpeech()
    model.build()
    with tempfile.TemporaryDirectory() as folder:
        export_dir = os.path.join(folder, "export")
        alphabet = CharacterAlphabet.english()
        sizes = export_deepspeech(model, os.path.join(folder, "float"), alphabet)
        quantised = export_deepspeech(
            model, export_dir, alphabet, quantization="dynamic"
        )
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")

        def worker(arg):
            out = subprocess.run(
                [*_harness.self_command(__spec__), f"--worker={arg}"],
                capture_output=True, text=True, env=env, check=True,
            )  # fmt: skip
            return float(out.stdout.strip().splitlines()[-1])

        real_time_factor = worker(f"rtf,{export_dir}")
    steps = worker("train")
    print(f"parameters: {model.count_params():,}\n")
    print("| what | measured | goal |")
    print("| --- | --- | --- |")
    print(f"| acoustic.tflite (float) | {sizes['acoustic.tflite'] / 1e6:.1f} MB | |")
    quant = quantised["acoustic.tflite"] / 1e6
    print(f"| acoustic.tflite (dynamic range) | {quant:.1f} MB | <= 50 MB |")
    print(f"| features.tflite | {sizes['features.tflite'] / 1e6:.2f} MB | |")
    print(
        f"| real-time factor, quantised, 1 thread | {real_time_factor:.3f} | <= 0.15 |"
    )
    print(f"| training steps / s, batch 16 x 5 s, 2 threads | {steps:.3f} | |")


if __name__ == "__main__":
    app.run(main)
