# SPDX-License-Identifier: Apache-2.0
"""The demo transducer's TFLite exports: float vs quantised, side by side.

For each export mode (float, dynamic range, full-integer int8 calibrated
on 200 training utterances) of the trained demo checkpoint: the programs'
size, greedy WER / CER of the streamed transcripts on the 54 test-voice
utterances, the real-time factor on one thread (a process pinned to one
core, 200 ms chunks, audio decoding excluded) and the interpreter's peak
memory (the high-water mark above the RSS before the programs were
loaded, /proc/self/clear_refs). Each mode runs in its own process.

Usage (after `make demo`, which trains the checkpoint):

  python -m benchmarks.bench_tflite [--checkpoint_dir runs/digits_demo/checkpoint]
"""

import json
import os
import subprocess
import tempfile

from absl import app
from absl import flags

from benchmarks import _harness

CHECKPOINT = flags.DEFINE_string(
    "checkpoint_dir", "runs/digits_demo/checkpoint", "A trained demo run."
)
WORKER = flags.DEFINE_string("worker", None, "Internal: an export folder to measure.")
MODES = ("float", "dynamic", "int8")


def measure(export_dir):
    """Prints {wer, cer, rtf, size, peak} of one export as JSON."""
    os.sched_setaffinity(0, {0})
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import peak_rss

    from tf_transducer.data.corpora import manifest
    from tf_transducer.data.manifest import read_manifest
    from tf_transducer.training.transducer_recipe import evaluate_export

    test = read_manifest(manifest("digits_test"))
    before = peak_rss.start()
    result = evaluate_export(
        export_dir, [u.path for u in test], [u.transcript for u in test]
    )
    result["peak"] = peak_rss.peak_above(before)
    del result["texts"]
    print(json.dumps(result))


def main(argv):
    del argv
    if WORKER.value:
        measure(WORKER.value)
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tf_transducer as tt
    from tf_transducer.data.corpora import manifest
    from tf_transducer.export import export_transducer
    from tf_transducer.training import transducer_recipe as recipe

    model, encoder = recipe.load_checkpoint(CHECKPOINT.value)
    features = tt.LogMelSpectrogram(**recipe.saved_features(CHECKPOINT.value))
    calibration = tt.data.calibration_audio(
        manifest("digits_train"), features.sample_rate, 200
    )
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for mode in MODES:
            export_dir = os.path.join(folder, mode)
            export_transducer(
                model,
                export_dir,
                encoder,
                features,
                quantization=mode,
                calibration_audio=calibration if mode == "int8" else None,
            )
            out = subprocess.run(
                [*_harness.self_command(__spec__), f"--worker={export_dir}"],
                capture_output=True,
                text=True,
                check=True,
                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
            )
            results[mode] = json.loads(out.stdout.strip().splitlines()[-1])
    base = results["float"]
    print(f"checkpoint {CHECKPOINT.value}; 54 test utterances, greedy, 1 thread\n")
    print("| programs | size | size / float | WER | CER | RTF | interpreter peak |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for mode, r in results.items():
        print(
            f"| {mode} | {r['size'] / 1e6:.2f} MB | {r['size'] / base['size']:.2f} "
            f"| {r['wer']:.3f} | {r['cer']:.3f} | {r['rtf']:.4f} "
            f"| {r['peak'] / 2**20:.1f} MiB |"
        )


if __name__ == "__main__":
    app.run(main)
