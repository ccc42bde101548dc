# SPDX-License-Identifier: Apache-2.0
"""`make demo`: a streaming RNN-T transducer for spoken digits, end to end.

1. Train a small transducer (log-mel -> 2-layer LSTM encoder, stateless
   prediction network, joiner; RnntLoss, SpecAugment) on the bundled
   spoken-digits corpus, train voices only (`train_loop`, a line per epoch).
2. Decode the test voices (never heard in training): WER and CER of greedy
   search and of modified beam search (beam 4).
3. Export the streaming TFLite programs (features, encoder chunk, prediction
   step, joiner; float and quantised).
4. Transcribe held-out test files chunk by chunk with the LiteRT
   interpreter, and check the streamed transcripts against the offline
   Keras ones on every test utterance.

Everything stays in --work_dir (default runs/digits_demo).
"""

import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import soundfile as sf  # noqa: E402
from absl import app, flags  # noqa: E402

from tf_transducer.data.corpora import manifest  # noqa: E402
from tf_transducer.training import transducer_recipe as recipe  # noqa: E402

WORK_DIR = flags.DEFINE_string("work_dir", "runs/digits_demo", "Outputs.")
EPOCHS = flags.DEFINE_integer("demo_epochs", 100, "Training epochs.", lower_bound=1)
SAMPLE_RATE, N_MELS, BEAM = 8000, 40, 4


def banner(step, text):
    print(f"\n=== {step}. {text} ===", flush=True)


def main(argv):
    del argv
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
    greedy_wer, cer, pairs = recipe.evaluate(model, encoder, test)
    print(f"greedy: {len(pairs)} utterances, WER {greedy_wer:.3f}, CER {cer:.3f}")
    wer, cer, pairs = recipe.evaluate(model, encoder, test, beam_width=BEAM)
    print(f"beam {BEAM}: {len(pairs)} utterances, WER {wer:.3f}, CER {cer:.3f}")
    for ref, hyp in pairs[:3]:
        print(f"  ref: {ref!r}\n  hyp: {hyp!r}")

    banner(3, f"export streaming TFLite programs to {export_dir}")
    from tf_transducer.export import TransducerStream, export_transducer

    sizes = export_transducer(model, export_dir, encoder, features)
    for name, size in sizes.items():
        print(f"  {name:24s} {size / 1e6:6.2f} MB")

    banner(4, "transcribe the test files chunk by chunk (LiteRT, 200 ms chunks)")
    stream = TransducerStream(export_dir, quantized=True)
    offline = [hyp for _, hyp in recipe.transcribe_data(model, encoder, test)]
    float_stream = TransducerStream(export_dir)
    progress = keras.utils.Progbar(len(test.paths), unit_name="file")
    same, same_quantized, seconds, compute = 0, 0, 0.0, 0.0
    quantized_texts = []
    for i, path in enumerate(test.paths):
        audio, _ = sf.read(path, dtype="float32")
        same += float_stream.transcribe(audio) == offline[i]
        began = time.perf_counter()
        text = stream.transcribe(audio)
        compute += time.perf_counter() - began
        seconds += len(audio) / SAMPLE_RATE
        same_quantized += text == offline[i]
        quantized_texts.append(text)
        progress.add(1)
    held_out = test.paths[0]
    audio, _ = sf.read(held_out, dtype="float32")
    print(
        f"  {os.path.basename(held_out)}: {float_stream.transcribe(audio)!r} "
        f"(reference {test.transcripts[0]!r})"
    )
    print(
        f"  streamed = offline greedy: {same}/{len(test.paths)} (float), "
        f"{same_quantized}/{len(test.paths)} (quantised)"
    )
    from tf_transducer.decoding import word_error_rate

    quantized_wer = word_error_rate(test.transcripts, quantized_texts)
    print(
        f"  quantised programs: WER {quantized_wer:.3f}, real-time factor "
        f"{compute / seconds:.3f} on 1 thread"
    )
    print(
        f"\ndone in {time.time() - start:.0f} s; test-voice WER {wer:.3f} "
        f"(beam {BEAM}), {greedy_wer:.3f} (greedy)"
    )
    return 0 if np.isfinite(wer) else 1


if __name__ == "__main__":
    app.run(main)
