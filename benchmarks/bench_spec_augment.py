# SPDX-License-Identifier: Apache-2.0
"""SpecAugment's LD policy against the feature extraction of the same batch.

Side by side (benchmarks/_harness.py), 2 threads, float32, in tf.function:

  * SpecAugment.from_preset("LD") (time warp W=80, 2 frequency masks F=27,
    2 time masks T=100) on features [32, 1000, 80] with random lengths in
    [500, 1000], training=True;
  * the features of that batch: LogMelSpectrogram(n_mels=80) (25 ms / 10 ms)
    of [32, 160240] audio at 16 kHz (1000 frames each).

Reported in utterances per second; the augmentation must cost less than the
features.

Usage: python -m benchmarks.bench_spec_augment [--rounds 10]
"""

import os

from absl import app
from absl import flags

from benchmarks import _harness  # noqa: E402

ROUNDS = flags.DEFINE_integer("rounds", 10, "Timings per configuration.", lower_bound=3)
WORKER = flags.DEFINE_string("worker", None, "Internal: 'augment' or 'features'.")

B, T, F = 32, 1000, 80
SAMPLES = 400 + 160 * (T - 1) + 1  # 25 ms windows every 10 ms: T frames


def serve(what):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(2)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    from tf_transducer.layers import LogMelSpectrogram
    from tf_transducer.layers import SpecAugment

    lengths = tf.random.stateless_uniform([B], [1, 2], 500, T + 1, tf.int32)
    if what == "augment":
        layer = SpecAugment.from_preset("LD", seed=0)
        x = tf.random.stateless_normal([B, T, F], [3, 4])
        fn = tf.function(lambda: layer(x, lengths, training=True))
    else:
        layer = LogMelSpectrogram(n_mels=F)
        audio = tf.random.stateless_normal([B, SAMPLES], [5, 6]) * 0.1
        audio_lengths = 400 + 160 * (lengths - 1)
        fn = tf.function(lambda: layer(audio, audio_lengths)[0])
    assert fn().shape == (B, T, F)
    _harness.serve(lambda: fn().numpy())


def main(argv):
    del argv
    if WORKER.value:
        serve(WORKER.value)
        return
    commands = {
        what: [*_harness.self_command(__spec__), f"--worker={what}"]
        for what in ("augment", "features")
    }
    seconds, _ = _harness.run_interleaved(commands, ROUNDS.value)
    print(f"[{B}, {T}, {F}] float32, 2 threads, medians of {ROUNDS.value} rounds\n")
    print("| what | ms per batch | utterances / s |")
    print("| --- | --- | --- |")
    names = {
        "augment": 'SpecAugment.from_preset("LD")',
        "features": "LogMelSpectrogram(n_mels=80) of the audio",
    }
    for what, name in names.items():
        print(f"| {name} | {seconds[what] * 1e3:.1f} | {B / seconds[what]:.0f} |")
    print(f"\naugmentation / features: {seconds['augment'] / seconds['features']:.3f}")


if __name__ == "__main__":
    app.run(main)
