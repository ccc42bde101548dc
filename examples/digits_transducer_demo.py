# SPDX-License-Identifier: Apache-2.0
"""`make demo`: a streaming RNN-T transducer for spoken digits, end to end.

1. Train a small transducer (log-mel -> 2-layer LSTM encoder, stateless
   prediction network, joiner; RnntLoss, SpecAugment) on the bundled
   spoken-digits corpus, train voices only (`train_loop`, a line per epoch).
2. Decode the test voices (never heard in training): WER and CER of greedy
   search and of modified beam search (beam 4).
3. Export the streaming TFLite programs (features, encoder chunk, prediction
   step, joiner) three times: float, dynamic-range quantised (int8
   weights) and full-integer int8 (calibrated on 200 training utterances).
4. Transcribe the test files chunk by chunk with the LiteRT interpreter
   with each export: WER, CER, size and real-time factor side by side, and
   the float streams checked against the offline Keras transcripts.

Everything stays in --work_dir (default runs/digits_demo).
"""

import logging
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
from absl import app, flags  # noqa: E402

from tf_transducer.data.corpora import manifest  # noqa: E402
from tf_transducer.training import transducer_recipe as recipe  # noqa: E402

WORK_DIR = flags.DEFINE_string("work_dir", "runs/digits_demo", "Outputs.")
EPOCHS = flags.DEFINE_integer("demo_epochs", 100, "Training epochs.", lower_bound=1)
SAMPLE_RATE, N_MELS, BEAM = 8000, 40, 4
MODES = ("float", "dynamic", "int8")


def banner(step, text):
    print(f"\n=== {step}. {text} ===", flush=True)


def main(argv):
    del argv
    logging.getLogger("tensorflow").setLevel(logging.WARNING)  # converter chatter
    start = time.time()
    run_dir = os.path.join(WORK_DIR.value, "checkpoint")
    export_dir = os.path.join(WORK_DIR.value, "tflite")

    banner(1, f"train on {manifest('digits_train')} (41 voices), {EPOCHS.value} epochs")
    model, encoder, _ = recipe.train(
        [manifest("digits_train")],
        run_dir,
        text_encoder="words",
        sample_rate=SAMPLE_RATE,
        n_mels=N_MELS,
        epochs=EPOCHS.value,
        encoder_units=256,
        verbose=2,
        overwrite=True,  # a fresh run every time (the timings stay comparable)
    )
    print(f"trained in {time.time() - start:.0f} s")

    banner(2, "decoding of the 3 unseen test voices")
    test, features = recipe.speech_data(
        [manifest("digits_test")], encoder, SAMPLE_RATE, N_MELS, 30.0
    )
    greedy_wer, greedy_cer, pairs = recipe.evaluate(model, encoder, test)
    print(
        f"greedy: {len(pairs)} utterances, WER {greedy_wer:.3f}, CER {greedy_cer:.3f}"
    )
    wer, cer, pairs = recipe.evaluate(model, encoder, test, beam_width=BEAM)
    print(f"beam {BEAM}: {len(pairs)} utterances, WER {wer:.3f}, CER {cer:.3f}")
    for ref, hyp in pairs[:3]:
        print(f"  ref: {ref!r}\n  hyp: {hyp!r}")

    banner(3, f"export streaming TFLite programs to {export_dir}/<mode>")
    from tf_transducer.data import calibration_audio
    from tf_transducer.export import export_transducer

    calibration = calibration_audio(manifest("digits_train"), SAMPLE_RATE, 200)
    for mode in MODES:
        sizes = export_transducer(
            model,
            os.path.join(export_dir, mode),
            encoder,
            features,
            quantization=mode,
            calibration_audio=calibration if mode == "int8" else None,
        )
        listed = ", ".join(f"{k} {v / 1e6:.2f}" for k, v in sizes.items())
        print(f"  {mode:8s} {sum(sizes.values()) / 1e6:5.2f} MB ({listed})")

    banner(4, "transcribe the test files chunk by chunk (LiteRT, 1 thread)")
    offline = [hyp for _, hyp in recipe.transcribe_data(model, encoder, test)]
    results = {
        mode: recipe.evaluate_export(
            os.path.join(export_dir, mode), test.paths, test.transcripts
        )
        for mode in MODES
    }
    print(f"  {'programs':10s} {'size MB':>8s} {'WER':>6s} {'CER':>6s} "
          f"{'RTF':>7s}  {'= offline greedy':>16s}")  # fmt: skip
    print(f"  {'Keras':10s} {'':>8s} {greedy_wer:6.3f} {greedy_cer:6.3f}")
    for mode, r in results.items():
        same = sum(a == b for a, b in zip(r["texts"], offline, strict=True))
        print(
            f"  {mode:10s} {r['size'] / 1e6:8.2f} {r['wer']:6.3f} {r['cer']:6.3f} "
            f"{r['rtf']:7.4f}  {same:>9d} / {len(offline)}"
        )
    print(
        f"  {os.path.basename(test.paths[0])}: {results['dynamic']['texts'][0]!r} "
        f"(reference {test.transcripts[0]!r})"
    )
    print(
        f"\ndone in {time.time() - start:.0f} s; test-voice WER {wer:.3f} "
        f"(beam {BEAM}), {greedy_wer:.3f} (greedy); quantised programs "
        f"{results['dynamic']['wer']:.3f} (dynamic), {results['int8']['wer']:.3f} "
        "(int8)"
    )
    return 0 if np.isfinite(wer) else 1


if __name__ == "__main__":
    app.run(main)
