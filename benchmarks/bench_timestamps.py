# SPDX-License-Identifier: Apache-2.0
"""Word start times against the truth, on real recordings whose times are known.

The 24 Allison strings of `digits_real` join recordings of single words, so
each word's start is known (`digits_real/real_words.json`, written by
make_real_digits). A trained run (default: the demo's, `make demo` first)
transcribes them offline (`transducer_greedy_graph`, the encoder and the
search in one graph) and streamed (its one-program recognizer, exported
here); `timed_words` gives each word's start. Words are paired with the
truth where the transcript matches it (difflib's matching blocks), and the
table gives, per way: words paired, and for the words' starts and ends the
share within 80 ms of the truth, and the median and 90th percentile of the
error (signed: positive is late; 90th pct: of the absolute error). A word
starts at the boundary label before it (the word delimiter; `timed_words`'
default) or, "first label", at its own label; it ends one frame after its
last label. "start, after a boundary": the words that had a boundary label
before them.

Usage: python -m benchmarks.bench_timestamps [--checkpoint_dir DIR]
"""

import difflib
import json
import os
import tempfile

import numpy as np
from absl import app
from absl import flags

from benchmarks import _harness

CHECKPOINT = flags.DEFINE_string(
    "checkpoint_dir", "runs/digits_demo/checkpoint", "A trained run's folder."
)
TOLERANCE = 0.08
NAN = float("nan")


EDGES = ("start", "start, first label", "end", "start, after a boundary")


def paired_errors(words, by_label, truth):
    """(start, start by first label, end, start if a boundary label came
    before the word else NaN) errors (seconds) of the words that match the
    truth's."""
    said = [w["word"] for w in truth]
    heard = [w.word for w in words]
    errors = []
    for block in difflib.SequenceMatcher(a=said, b=heard).get_matching_blocks():
        for k in range(block.size):
            got, want = words[block.b + k], truth[block.a + k]
            label = by_label[block.b + k]
            after = got.start - want["start"] if got.start < label.start else NAN
            errors.append((got.start - want["start"], label.start - want["start"],
                           got.end - want["end"], after))  # fmt: skip
    return errors


def main(argv):
    del argv
    tf = _harness.tensorflow_with_threads(2)
    import tf_transducer as tt
    from tf_transducer.data.corpora import path
    from tf_transducer.decoding import timed_words
    from tf_transducer.decoding import transducer_greedy_graph
    from tf_transducer.export import RecognizerStream
    from tf_transducer.export import export_recognizer
    from tf_transducer.training import transducer_recipe as recipe

    model, text_encoder = recipe.load_checkpoint(CHECKPOINT.value)
    with open(os.path.join(CHECKPOINT.value, "run.json")) as f:
        features_config = json.load(f)["config"]["features"]
    features = tt.LogMelSpectrogram(
        sample_rate=features_config["sample_rate"], n_mels=features_config["n_mels"]
    )
    folder = path("digits_real")
    with open(os.path.join(folder, "real_words.json")) as f:
        truth = json.load(f)
    seconds = model.encoder.subsampling * features.frame_step / features.sample_rate
    search = tf.function(lambda x, n: transducer_greedy_graph(model, (x, n)),
                         reduce_retracing=True)  # fmt: skip
    errors = {"offline (graph greedy)": [], "streamed (one-program recognizer)": []}
    words_said = 0
    with tempfile.TemporaryDirectory() as export_dir:
        export_recognizer(model, export_dir, text_encoder, features)
        stream = RecognizerStream(export_dir)
        for name, spans in truth.items():
            words_said += len(spans)
            audio = tt.data.load_audio(os.path.join(folder, name), features.sample_rate)
            mels, frames = features(audio[None])
            best = search(mels, frames)
            n = int(best.label_length[0])
            labels, at, sure = (x[0, :n] for x in (best.labels, best.frames,
                                                  best.confidence))  # fmt: skip
            stream.transcribe(audio)
            for way, found in (
                ("offline (graph greedy)", (labels, at, sure)),
                ("streamed (one-program recognizer)",
                 (stream.labels, stream.frames, stream.confidence)),
            ):  # fmt: skip
                words, by_label = (
                    timed_words(*found, text_encoder, seconds, starts=starts)
                    for starts in ("boundary", "label")
                )
                errors[way] += paired_errors(words, by_label, spans)
    print(f"{CHECKPOINT.value}: {len(truth)} real recordings, {words_said} words; "
          f"{seconds * 1e3:.0f} ms per encoder frame\n")  # fmt: skip
    print("| way | words paired | edge | within 80 ms | median error | 90th pct |")
    print("| --- | --- | --- | --- | --- | --- |")
    for way, found in errors.items():
        found = np.asarray(found).reshape(-1, len(EDGES))
        for column, edge in enumerate(EDGES):
            error = found[:, column]
            error = error[~np.isnan(error)]  # (only words after a boundary)
            within = np.mean(np.abs(error) <= TOLERANCE) if error.size else 0.0
            print(f"| {way} | {len(error)} / {words_said} | {edge} | {within:.1%} | "
                  f"{np.median(error) * 1e3:+.0f} ms | "
                  f"{np.percentile(np.abs(error), 90) * 1e3:.0f} ms |")  # fmt: skip


if __name__ == "__main__":
    app.run(main)
