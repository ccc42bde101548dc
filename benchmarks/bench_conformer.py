# SPDX-License-Identifier: Apache-2.0
"""The streaming Conformer transducer: size, on-device speed, training cost, WER.

Four parts, each printed as a Markdown table:

  1. presets (the Conformer PRESETS, 256 classes, 80 log-mels at 16 kHz,
     random weights): parameters; TFLite size per mode (float, dynamic
     range, int8 calibrated on the bundled LibriVox clips); in a process
     pinned to one core, the real-time factor of TransducerStream over the
     clips in 200 ms pieces, the encoder program's time per chunk, the
     algorithmic latency (the chunk, plus what the last frame's window
     reaches past it); and the largest difference between the float
     program's encoder outputs and the Keras model's offline ones;
  2. one training step (forward, FusedRnntLoss, backward, Adam; 2 threads)
     at batch 16 of 10-second utterances (1000 frames, 60 labels, 256
     classes) of "conformer-10m" and of an LSTM transducer of about the
     same parameter count (4 LSTMs stacking 4 frames: the same 40 ms
     encoder frames), side by side (benchmarks/_harness.py);
  3. the demo's two trained models (`make demo` first): beam-4 and greedy
     WER on the synthetic and the real test voices, Keras offline;
  4. the same models exported three ways and streamed (LiteRT, 1 thread):
     WER per mode, and how many streamed transcripts equal the offline
     Keras greedy ones.

Usage: python -m benchmarks.bench_conformer [--rounds 3] [--work_dir runs/digits_demo]
"""

import json
import os
import subprocess
import tempfile
import time

import numpy as np
from absl import app
from absl import flags

from benchmarks import _harness

ROUNDS = flags.DEFINE_integer("rounds", 3, "Timings per configuration.", lower_bound=1)
WORK_DIR = flags.DEFINE_string("work_dir", "runs/digits_demo", "A `make demo` run.")
PARTS = flags.DEFINE_multi_enum(
    "parts", ["presets", "training", "demo"], ["presets", "training", "demo"],
    "What to measure.",
)  # fmt: skip
WORKER = flags.DEFINE_string("worker", None, "Internal: a role and its argument.")
MODES = ("float", "dynamic", "int8")
CLASSES, MELS, RATE = 256, 80, 16000
BATCH, FRAMES, LABELS = 16, 1000, 60
DEMO_RUNS = {"lstm": "checkpoint", "conformer": "conformer/checkpoint"}


def _preset_model(name):
    import keras

    from tf_transducer.models import Transducer

    keras.utils.set_random_seed(0)
    model = Transducer.from_preset(
        name, CLASSES, feature_dim=MELS, normalization="global"
    )
    model.build()
    return model


def _clips():
    from tf_transducer.data import load_audio
    from tf_transducer.data import read_manifest
    from tf_transducer.data.corpora import manifest

    return [load_audio(u.path, RATE) for u in read_manifest(manifest("librivox"))]


def _text_encoder():
    from tf_transducer.data import SubwordEncoder

    words = [f"w{i}" for i in range(CLASSES - 2)]
    return SubwordEncoder.train(words, CLASSES, model_type="word")


# ------------------------------------------------------------------ part 1


def _stream_speed(export_dir):
    """Worker: {rtf, chunk_ms} of one export, pinned to one core."""
    os.sched_setaffinity(0, {0})
    _harness.tensorflow_with_threads(1)
    from tf_transducer.export import TransducerStream

    stream = TransducerStream(export_dir, num_threads=1)
    encode, chunk_times = stream.programs["encoder"], []

    def timed(**inputs):
        began = time.perf_counter()
        out = encode(**inputs)
        chunk_times.append(time.perf_counter() - began)
        return out

    stream.programs["encoder"] = timed
    clips = _clips()
    stream.transcribe(clips[0][:RATE])  # warm-up
    chunk_times.clear()
    compute, seconds = 0.0, 0.0
    for audio in clips:
        began = time.perf_counter()
        stream.transcribe(audio, chunk_samples=RATE // 5)
        compute += time.perf_counter() - began
        seconds += len(audio) / RATE
    print(json.dumps({"rtf": compute / seconds,
                      "chunk_ms": 1e3 * float(np.median(chunk_times))}))  # fmt: skip


def _keras_vs_tflite(model, export_dir, clips, features):
    """Largest |float program - Keras offline| over the clips' encoder outputs."""
    from tf_transducer.export import TransducerStream

    stream = TransducerStream(export_dir)
    encode, worst = stream.programs["encoder"], 0.0
    for audio in clips:
        outputs = []

        def recording(outputs=outputs, **inputs):
            out = encode(**inputs)
            outputs.append(out["encoder"][0])
            return out

        stream.programs["encoder"] = recording
        stream.transcribe(audio)
        mels, frames = features(audio[None])
        encoded, lengths = model.encode((mels, frames))
        want = np.asarray(model.joiner.project_encoder(encoded))[0, : int(lengths[0])]
        got = np.concatenate(outputs)[: len(want)]
        worst = max(worst, float(np.abs(got - want).max()))
    return worst


def presets():
    import tf_transducer as tt
    from tf_transducer.export import export_transducer

    _harness.tensorflow_with_threads(2)
    features = tt.LogMelSpectrogram(sample_rate=RATE, n_mels=MELS)
    clips, text_encoder = _clips(), _text_encoder()
    rows = []
    for name in ("conformer-2m", "conformer-10m"):
        model = _preset_model(name)
        mels = [features(a[None])[0][0] for a in clips]
        joined = np.concatenate(mels)[None]
        model.normalizer.adapt([(joined, np.array([joined.shape[1]], np.int32))])
        row = {"name": name, "params": model.count_params()}
        with tempfile.TemporaryDirectory() as folder:
            for mode in MODES:
                export_dir = os.path.join(folder, mode)
                sizes = export_transducer(
                    model, export_dir, text_encoder, features, quantization=mode,
                    calibration_audio=clips if mode == "int8" else None,
                )  # fmt: skip
                row[mode] = sum(sizes.values())
                out = subprocess.run(
                    [*_harness.self_command(__spec__), f"--worker=speed:{export_dir}"],
                    capture_output=True, text=True, check=True, cwd=_harness.ROOT,
                )  # fmt: skip
                row[mode, "speed"] = json.loads(out.stdout.strip().splitlines()[-1])
            row["diff"] = _keras_vs_tflite(
                model, os.path.join(folder, "float"), clips, features
            )
        encoder = model.encoder
        hop = features.frame_step / RATE
        row["chunk_s"] = encoder.chunk_size * encoder.subsampling * hop
        row["window_s"] = (features.frame_length - features.frame_step) / RATE
        rows.append(row)
    seconds = sum(len(a) for a in clips) / RATE
    print(f"\n### Presets ({CLASSES} classes, {MELS} log-mels at {RATE} Hz, "
          f"random weights; LibriVox clips, {seconds:.0f} s, in 200 ms pieces, "
          "1 core)\n")  # fmt: skip
    print("| preset | parameters | TFLite MB float / dynamic / int8 | RTF float / "
          "dynamic / int8 | encoder ms per chunk (dynamic) | algorithmic latency "
          "| max abs Keras - TFLite (float) |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        sizes = " / ".join(f"{r[m] / 1e6:.2f}" for m in MODES)
        rtfs = " / ".join(f"{r[m, 'speed']['rtf']:.4f}" for m in MODES)
        print(
            f"| {r['name']} | {r['params']:,} | {sizes} | {rtfs} "
            f"| {r['dynamic', 'speed']['chunk_ms']:.1f} "
            f"| {1e3 * r['chunk_s']:.0f} ms chunk (+{1e3 * r['window_s']:.0f} ms "
            f"window) | {r['diff']:.2e} |"
        )


# ------------------------------------------------------------------ part 2


def _lstm_like(params):
    """An LSTM Transducer (4 layers, stack 4) of about `params` parameters."""
    from tf_transducer.models import PRESETS
    from tf_transducer.models import Transducer

    conformer = PRESETS["conformer-10m"]  # its prediction network and joiner

    def build(units):
        model = Transducer(
            CLASSES,
            dict(class_name="TransducerEncoder", units=units, num_layers=4, stack=4),
            conformer["predictor"],
            conformer["joiner"],
            feature_dim=MELS,
            normalization="global",
        )
        model.build()
        return model

    low, high = 64, 2048
    while high - low > 8:
        middle = (low + high) // 2
        if build(middle).count_params() < params:
            low = middle
        else:
            high = middle
    return build(low)


def _training_step(kind):
    """Worker: serves one training step's time of "conformer" or "lstm"."""
    tf = _harness.tensorflow_with_threads(2)
    import keras

    from tf_transducer.losses import FusedRnntLoss

    conformer = _preset_model("conformer-10m")
    model = conformer if kind == "conformer" else _lstm_like(conformer.count_params())
    rng = np.random.default_rng(0)
    x = (
        tf.constant(rng.normal(size=(BATCH, FRAMES, MELS)).astype(np.float32)),
        tf.constant(rng.integers(FRAMES * 3 // 4, FRAMES + 1, BATCH).astype(np.int32)),
    )
    y = tf.constant(rng.integers(1, CLASSES, (BATCH, LABELS)).astype(np.int32))
    model.compile(optimizer=keras.optimizers.Adam(1e-4), loss=FusedRnntLoss(),
                  jit_compile=False)  # fmt: skip

    def step():
        model.train_on_batch(x, y)

    _harness.serve(step, report=lambda: {"params": model.count_params()})


def training():
    command = _harness.self_command(__spec__)
    medians, reports = _harness.run_interleaved(
        {k: [*command, f"--worker=train:{k}"] for k in ("conformer", "lstm")},
        ROUNDS.value,
    )
    print(f"\n### Training step (batch {BATCH} x {FRAMES} frames = 10 s, {LABELS} "
          f"labels, {CLASSES} classes, FusedRnntLoss, Adam, 2 threads; median of "
          f"{ROUNDS.value} interleaved rounds)\n")  # fmt: skip
    print("| encoder | parameters | step s | / LSTM |")
    print("| --- | --- | --- | --- |")
    for kind in ("conformer", "lstm"):
        print(f"| {kind} | {reports[kind]['params']:,} | {medians[kind]:.2f} "
              f"| {medians[kind] / medians['lstm']:.2f}x |")  # fmt: skip


# ------------------------------------------------------------------ parts 3, 4


def demo():
    _harness.tensorflow_with_threads(2)
    from tf_transducer.data import calibration_audio
    from tf_transducer.data.corpora import manifest
    from tf_transducer.export import export_transducer
    from tf_transducer.training import transducer_recipe as recipe

    sets = {"synthetic": "digits_test", "real": "digits_real"}
    keras_rows, lite_rows = [], []
    for kind, run in DEMO_RUNS.items():
        checkpoint = os.path.join(WORK_DIR.value, run)
        if not os.path.isdir(checkpoint):
            print(f"(no {kind} run in {checkpoint}: `make demo` trains it)")
            continue
        model, text_encoder = recipe.load_checkpoint(checkpoint)
        saved = recipe.saved_features(checkpoint)
        data, offline, row = {}, {}, {"kind": kind}
        for name, key in sets.items():
            data[name], features = recipe.speech_data(
                [manifest(key)], text_encoder, saved["sample_rate"], saved["n_mels"]
            )
            greedy, _, pairs = recipe.evaluate(model, text_encoder, data[name])
            beam, _, _ = recipe.evaluate(
                model, text_encoder, data[name], beam_width=4, beam_method="standard"
            )
            offline[name] = [hyp for _, hyp in pairs]
            row[name] = (greedy, beam)
        keras_rows.append(row)
        calibration = calibration_audio(manifest("digits_train"),
                                        saved["sample_rate"], 200)  # fmt: skip
        with tempfile.TemporaryDirectory() as folder:
            for mode in MODES:
                export_dir = os.path.join(folder, mode)
                export_transducer(model, export_dir, text_encoder, features,
                                  quantization=mode,
                                  calibration_audio=calibration if mode == "int8"
                                  else None)  # fmt: skip
                lite = {"kind": kind, "mode": mode, "same": 0, "total": 0}
                for name in sets:
                    result = recipe.evaluate_export(
                        export_dir, data[name].paths, data[name].transcripts
                    )
                    lite[name] = result["wer"]
                    lite["same"] += sum(a == b for a, b in zip(
                        result["texts"], offline[name], strict=True))  # fmt: skip
                    lite["total"] += len(offline[name])
                lite_rows.append(lite)
    if not keras_rows:
        return
    print(f"\n### The demo's models ({WORK_DIR.value}), Keras offline\n")
    print("| encoder | WER synthetic greedy / beam 4 | WER real greedy / beam 4 |")
    print("| --- | --- | --- |")
    for r in keras_rows:
        print(f"| {r['kind']} | {r['synthetic'][0]:.3f} / {r['synthetic'][1]:.3f} "
              f"| {r['real'][0]:.3f} / {r['real'][1]:.3f} |")  # fmt: skip
    print("\n### The demo's models streamed (TFLite, greedy, 1 thread)\n")
    print("| encoder | programs | WER synthetic | WER real | streamed = offline |")
    print("| --- | --- | --- | --- | --- |")
    for r in lite_rows:
        print(f"| {r['kind']} | {r['mode']} | {r['synthetic']:.3f} | "
              f"{r['real']:.3f} | {r['same']} / {r['total']} |")  # fmt: skip


def main(argv):
    del argv
    if WORKER.value:
        role, _, argument = WORKER.value.partition(":")
        if role == "speed":
            _stream_speed(argument)
        else:
            _training_step(argument)
        return
    if "presets" in PARTS.value:
        presets()
    if "training" in PARTS.value:
        training()
    if "demo" in PARTS.value:
        demo()


if __name__ == "__main__":
    app.run(main)
