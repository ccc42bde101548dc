# SPDX-License-Identifier: Apache-2.0
"""The demo transducer: training step with the full, fused and pruned losses, and the
real-time factor of its quantised streaming TFLite programs.

  * side by side (benchmarks/_harness.py), 2 threads: one training step
    (forward, loss, backward, Adam) of the demo's model (40 log-mels at
    8 kHz, 2 x 256 LSTM encoder stacking 3 frames, stateless prediction
    network, 128 joiner, 12 word classes) on the same batch of 16 digit
    utterances, with RnntLoss, FusedRnntLoss (the joiner inside the loss)
    and PrunedRnntLoss(s_range=4);
  * streaming: TransducerStream(num_threads=1) of a dynamic-range export in a process
    pinned to one core over the 54 test utterances in 200 ms chunks (the
    demo's export in --export_dir if present, else an untrained model of the
    same size, which is noted).

Usage: python -m benchmarks.bench_transducer [--rounds 10] [--export_dir D]
"""

import os
import tempfile
import time

from absl import app
from absl import flags

from benchmarks import _harness  # noqa: E402

ROUNDS = flags.DEFINE_integer("rounds", 10, "Timings per configuration.", lower_bound=3)
EXPORT_DIR = flags.DEFINE_string(
    "export_dir", "runs/digits_demo/tflite/dynamic", "Demo export (dynamic range)."
)
WORKER = flags.DEFINE_string("worker", None, "Internal.")


def _demo_model(vocab_size):
    from tf_transducer.models import Transducer

    # The recipe's model (lstm-1m: 3 stacked frames); 40 log-mels, as measured.
    model = Transducer.from_preset(
        "lstm-1m", vocab_size, feature_dim=40, normalization="global"
    )
    model.build()
    return model


def _digits(tf):
    import csv

    import tf_transducer as tt
    from tf_transducer.data.corpora import manifest

    with open(manifest("digits_train")) as f:
        texts = [row["transcript"] for row in csv.DictReader(f)]
    encoder = tt.SubwordEncoder.train(texts, 12, model_type="word")
    features = tt.LogMelSpectrogram(sample_rate=8000, n_mels=40)
    return encoder, features


def serve_step(loss_name):
    tf = _harness.tensorflow_with_threads(2)
    import keras

    import tf_transducer as tt
    from tf_transducer.data.corpora import manifest
    from tf_transducer.losses import FusedRnntLoss
    from tf_transducer.losses import PrunedRnntLoss
    from tf_transducer.losses import RnntLoss

    encoder, features = _digits(tf)
    data = tt.SpeechDataset(manifest("digits_train"), encoder, 8000, features)
    batch = next(iter(data.dataset(16, seed=0)))
    x, y = (batch["features"], batch["feature_length"]), batch["labels"]
    keras.utils.set_random_seed(0)
    model = _demo_model(encoder.vocab_size)
    loss = {
        "full": RnntLoss,
        "fused": FusedRnntLoss,
        "pruned": lambda: PrunedRnntLoss(s_range=4),
    }[loss_name]()
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=loss)
    model.train_on_batch(x, y)
    _harness.serve(lambda: model.train_on_batch(x, y))


def rtf(export_dir):
    os.sched_setaffinity(0, {0})
    _harness.tensorflow_with_threads(1)
    import soundfile as sf

    import tf_transducer as tt
    from tf_transducer.data.corpora import manifest
    from tf_transducer.export import TransducerStream

    stream = TransducerStream(export_dir, quantization="dynamic", num_threads=1)
    data = tt.SpeechDataset(manifest("digits_test"), stream.text_encoder, 8000)
    audio = [sf.read(p, dtype="float32")[0] for p in data.paths]
    stream.transcribe(audio[0])  # warm-up
    start = time.perf_counter()
    for a in audio:
        stream.transcribe(a, chunk_samples=1600)
    print((time.perf_counter() - start) / sum(data.durations))


def main(argv):
    del argv
    if WORKER.value:
        what, *rest = WORKER.value.split(",")
        serve_step(rest[0]) if what == "step" else rtf(rest[0])
        return
    import subprocess

    commands = {
        name: [*_harness.self_command(__spec__), f"--worker=step,{name}"]
        for name in ("full", "fused", "pruned")
    }
    seconds, _ = _harness.run_interleaved(commands, ROUNDS.value)
    export_dir, note = EXPORT_DIR.value, "the demo's trained export"
    with tempfile.TemporaryDirectory() as folder:
        if not os.path.isfile(os.path.join(export_dir, "export.json")):
            tf = _harness.tensorflow_with_threads(2)
            from tf_transducer.export import export_transducer

            encoder, features = _digits(tf)
            export_dir, note = (
                os.path.join(folder, "e"),
                "an untrained model of its size",
            )
            export_transducer(
                _demo_model(encoder.vocab_size),
                export_dir,
                encoder,
                features,
                quantization="dynamic",
            )
        out = subprocess.run(
            [*_harness.self_command(__spec__), f"--worker=rtf,{export_dir}"],
            capture_output=True,
            text=True,
            check=True,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        )
        factor = float(out.stdout.strip().splitlines()[-1])
    print(f"medians of {ROUNDS.value} interleaved rounds, batch 16, 2 threads\n")
    print("| what | measured | goal |")
    print("| --- | --- | --- |")
    print(f"| training step, RnntLoss | {seconds['full'] * 1e3:.1f} ms | |")
    print(f"| training step, FusedRnntLoss | {seconds['fused'] * 1e3:.1f} ms | |")
    print(f"| fused / full | {seconds['fused'] / seconds['full']:.2f} | <= 1.0 |")
    print(
        "| training step, PrunedRnntLoss(s_range=4) | "
        f"{seconds['pruned'] * 1e3:.1f} ms | |"
    )
    print(f"| pruned / full | {seconds['pruned'] / seconds['full']:.2f} | |")
    print(
        f"| streaming RTF, quantised TFLite, 1 thread ({note}) | {factor:.4f} ", end=""
    )
    print("| <= 0.05 |")


if __name__ == "__main__":
    app.run(main)
