# SPDX-License-Identifier: Apache-2.0
"""The demo transducer on synthetic test voices and on real human speech.

For a `make demo` run folder: WER and CER of the Keras model (greedy and
standard beam search, beam 4) and of its streamed TFLite exports (float,
dynamic, int8; LiteRT, greedy) on the 54 synthetic test-voice utterances
(digits_test) and on the 25 real human recordings (digits_real, never
trained on). Hypotheses are computed from the audio alone, so that a model
whose vocabulary lacks a word of the references ("oh") is scored too (that
word is then an error).

Usage (after `make demo`; a run of another revision works the same):

  python -m benchmarks.bench_real_speech [--work_dir runs/digits_demo]
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

WORK_DIR = flags.DEFINE_string("work_dir", "runs/digits_demo", "A demo run folder.")
SETS = {"synthetic": "digits_test", "real": "digits_real"}
MODES = ("float", "dynamic", "int8")
BEAM, BEAM_METHOD = 4, "standard"  # as the demo decodes


def keras_hypotheses(model, encoder, features, paths, beam_width):
    """Transcripts of audio files (decoded one by one, no padding)."""
    import numpy as np

    from tf_transducer.data import load_audio
    from tf_transducer.training.transducer_recipe import decode_batch

    texts = []
    for path in paths:
        audio = load_audio(path, features.sample_rate)[np.newaxis]
        values, lengths = features(audio, [audio.shape[1]])
        batch = {"features": values, "feature_length": lengths}
        (labels,) = decode_batch(
            model, batch, beam_width=beam_width, beam_method=BEAM_METHOD
        )
        texts.append(encoder.decode(labels))
    return texts


def main(argv):
    del argv
    import tf_transducer as tt
    from tf_transducer.data import read_manifest
    from tf_transducer.data.corpora import manifest
    from tf_transducer.decoding import char_error_rate
    from tf_transducer.decoding import word_error_rate
    from tf_transducer.training import transducer_recipe as recipe

    checkpoint = os.path.join(WORK_DIR.value, "checkpoint")
    model, encoder = recipe.load_checkpoint(checkpoint)
    features = tt.LogMelSpectrogram(**recipe.saved_features(checkpoint))
    rows = []
    for name, key in SETS.items():
        utterances = read_manifest(manifest(key))
        paths = [u.path for u in utterances]
        refs = [u.transcript for u in utterances]
        for label, beam in (("Keras greedy", 1), (f"Keras beam {BEAM}", BEAM)):
            hyps = keras_hypotheses(model, encoder, features, paths, beam)
            rows.append((name, label, word_error_rate(refs, hyps),
                         char_error_rate(refs, hyps)))  # fmt: skip
        for mode in MODES:
            export_dir = os.path.join(WORK_DIR.value, "tflite", mode)
            if os.path.isdir(export_dir):
                r = recipe.evaluate_export(export_dir, paths, refs)
                rows.append((name, f"TFLite {mode}", r["wer"], r["cer"]))
    print(f"{WORK_DIR.value} (vocabulary of {encoder.vocab_size} classes)")
    print("| set | decoder | WER | CER |\n| --- | --- | --- | --- |")
    for name, label, wer, cer in rows:
        print(f"| {name} | {label} | {wer:.3f} | {cer:.3f} |")


if __name__ == "__main__":
    app.run(main)
