# SPDX-License-Identifier: Apache-2.0
"""Greedy search as one graph (label looping) against the numpy search.

A batch of 32 ten-second utterances (1000 feature frames, 250 encoder
frames) through the "conformer-10m" preset with random weights, 256
classes, as an RNN-T and as a TDT (durations [0, 1, 2, 3, 4]). The blank's
output bias is raised so that about one label in four frames is emitted,
as a trained model does on read speech (the measured rate is printed). The
encoder runs once; what is timed is the search on its projected frames:

  * numpy: `greedy_search` / `tdt_greedy_search` on `KerasSteps` (traced
    step functions, a Python loop around them);
  * graph, eager: `label_looping_greedy` run eagerly;
  * graph, tf.function: traced once with unknown batch and time;
  * graph, XLA: the same with jit_compile=True;
  * graph, XLA, NeMo's schedule: found_share=1.0, the prediction network
    run only once every utterance has found its next label (our default,
    0.1, runs it once a tenth of them have);

and beam search (beam 4): numpy `modified_beam_search` (RNN-T) or
`tdt_beam_search` (TDT) utterance by utterance, and `modified_beam_graph`
or `tdt_beam_graph` traced and under XLA, for the whole batch.

Each graph search is checked against the numpy one (same labels) before it
is timed. 2 threads; the median of --rounds timings.

Then, on one core: the real-time factor of the "lstm-1m" preset (random
weights, blank bias raised as above, 8 kHz, 40 log-mels) exported as four
programs run by `TransducerStream` (the search in Python) and as the
one-program recognizer run by `RecognizerStream` (the search inside), over
the digits test voices fed 100 ms at a time; their transcripts are checked
to be equal.

Usage: python -m benchmarks.bench_graph_decoding [--rounds 5] [--batch 32]
"""

import json
import statistics
import subprocess
import sys
import time

import numpy as np
from absl import app
from absl import flags

from benchmarks import _harness

ROUNDS = flags.DEFINE_integer("rounds", 5, "Timings per search.", lower_bound=1)
BATCH = flags.DEFINE_integer("batch", 32, "Utterances per batch.", lower_bound=1)
SECONDS = flags.DEFINE_float("seconds", 10.0, "Seconds per utterance.")
WORKER = flags.DEFINE_string("worker", None, "Internal: 'rtf' (the one-core part).")
CLASSES, MELS, DURATIONS = 256, 80, [0, 1, 2, 3, 4]


def blank_bias_for_rate(model, projected, lengths, steps, rate=0.25):
    """Raises the blank's output bias until greedy search emits ~rate labels
    per frame (bisection on the bias); returns the measured rate."""
    from tf_transducer.decoding import greedy_search
    from tf_transducer.decoding import tdt_greedy_search

    bias = model.joiner.output_projection.bias
    base = bias.numpy()

    def emitted(shift):
        bias.assign(base + np.eye(len(base), dtype=np.float32)[0] * shift)
        sample, n = projected[:4, :60], np.minimum(lengths[:4], 60)
        if getattr(model.joiner, "durations", None) is not None:
            hyps = tdt_greedy_search(sample, n, steps, DURATIONS)[0]
        else:
            hyps = greedy_search(sample, n, steps)[0]
        return sum(map(len, hyps)) / n.sum()

    low, high = -5.0, 25.0
    for _ in range(12):
        middle = (low + high) / 2
        low, high = (middle, high) if emitted(middle) > rate else (low, middle)
    return emitted(high)


def timed(function, rounds):
    function()  # tracing, compiling
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        function()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def measure(tdt, tf):
    import keras

    from tf_transducer.decoding import greedy_search
    from tf_transducer.decoding import keras_graph_steps
    from tf_transducer.decoding import label_looping_greedy
    from tf_transducer.decoding import tdt_greedy_search
    from tf_transducer.decoding.keras_steps import KerasSteps
    from tf_transducer.decoding.keras_steps import encode_projected
    from tf_transducer.models import Transducer

    keras.utils.set_random_seed(0)  # the same random model in every run
    joiner = {"durations": DURATIONS} if tdt else None
    model = Transducer.from_preset("conformer-10m", CLASSES, joiner=joiner,
                                   feature_dim=MELS)  # fmt: skip
    model.build()
    rng = np.random.default_rng(0)
    frames = int(SECONDS.value * 100)
    features = rng.normal(size=[BATCH.value, frames, MELS]).astype(np.float32)
    lengths = np.full([BATCH.value], frames, np.int32)
    lengths[1::2] = frames * 3 // 4  # padding, as in a real batch
    projected, encoded_lengths = encode_projected(model, (features, lengths))
    steps = KerasSteps(model)
    rate = blank_bias_for_rate(model, projected, encoded_lengths, steps)
    durations = DURATIONS if tdt else None

    def numpy_search():
        if tdt:
            return tdt_greedy_search(projected, encoded_lengths, steps, DURATIONS)[0]
        return greedy_search(projected, encoded_lengths, steps)[0]

    graph_steps = keras_graph_steps(model)

    def search(e, n, found_share=0.1):
        return label_looping_greedy(e, n, graph_steps, durations,
                                    found_share=found_share)  # fmt: skip

    def nemo(e, n):
        return search(e, n, found_share=1.0)

    signature = [tf.TensorSpec([None, None, projected.shape[-1]]),
                 tf.TensorSpec([None], tf.int32)]  # fmt: skip
    ways = {
        "graph, eager": search,
        "graph, tf.function": tf.function(search, input_signature=signature),
        "graph, XLA": tf.function(search, input_signature=signature, jit_compile=True),
        "graph, XLA, NeMo's schedule": tf.function(
            nemo, input_signature=signature, jit_compile=True
        ),
    }
    want = numpy_search()
    times = {"numpy": timed(numpy_search, ROUNDS.value)}
    for name, way in ways.items():
        hyps = way(projected, encoded_lengths)
        count = hyps.label_length.numpy()
        got = [hyps.labels[b, :n].numpy().tolist() for b, n in enumerate(count)]
        if got != want:
            raise AssertionError(f"{name} differs from the numpy search")
        at = [hyps.frames[b, :n].numpy() for b, n in enumerate(count)]
        rounds = 1 if name == "graph, eager" else ROUNDS.value
        times[name] = timed(lambda w=way: w(projected, encoded_lengths), rounds)
    if not tdt:
        times["floor: the same joints and predictions in bulk"] = compute_floor(
            model, projected, encoded_lengths, want, at, tf
        )
    beam_searches(projected, encoded_lengths, steps, graph_steps, signature, times,
                  tf, durations)  # fmt: skip
    return rate, times


def compute_floor(model, projected, lengths, hyps, frames, tf):
    """Seconds of the greedy search's useful work done in bulk: the
    prediction network over each utterance's labels (teacher-forced, the
    batch at once) and the joint, in one call, on exactly the (frame,
    label state) pairs the search evaluates (every frame, and once more per
    label emitted on it). No batched search does less arithmetic."""
    units = max(map(len, hyps))
    context = np.zeros([len(hyps), units + 1], np.int32)
    for b, labels in enumerate(hyps):
        context[b, 1 : len(labels) + 1] = labels
    rows, cols = [], []
    for b in range(len(hyps)):
        emitted, u = np.bincount(frames[b], minlength=lengths[b]), 0
        for t in range(int(lengths[b])):
            # (a blank ends the frame, unless max_symbols_per_frame = 3 did)
            for k in range(min(int(emitted[t]) + 1, 3)):
                rows.append((b, t))
                cols.append((b, u + k))
            u += int(emitted[t])
    rows, cols = tf.constant(rows), tf.constant(cols)

    @tf.function
    def bulk(context):
        decoder = model.joiner.project_decoder(model.predictor(context))
        logits = model.joiner.joint(
            tf.gather_nd(projected, rows), tf.gather_nd(decoder, cols)
        )
        return tf.argmax(tf.nn.log_softmax(logits), axis=-1)

    return timed(lambda: bulk(context).numpy(), ROUNDS.value)


def beam_searches(projected, lengths, steps, graph_steps, signature, times, tf,
                  durations):  # fmt: skip
    """Adds numpy and graph beam-4 search to times (checked to agree); a TDT's
    with durations."""
    from tf_transducer.decoding import modified_beam_graph
    from tf_transducer.decoding import modified_beam_search
    from tf_transducer.decoding import tdt_beam_graph
    from tf_transducer.decoding import tdt_beam_search

    def numpy_beam():
        if durations is not None:
            return [tdt_beam_search(projected[b, :n], steps, durations, 4)[0]
                    for b, n in enumerate(lengths)]  # fmt: skip
        return [modified_beam_search(projected[b, :n], steps, 4)[0]
                for b, n in enumerate(lengths)]  # fmt: skip

    def search(e, n):
        if durations is not None:
            return tdt_beam_graph(e, n, graph_steps, durations, 4)
        return modified_beam_graph(e, n, graph_steps, 4)

    want = numpy_beam()
    times["numpy beam 4"] = timed(numpy_beam, 1)
    for name, jit in (
        ("graph beam 4, tf.function", False),
        ("graph beam 4, XLA", True),
    ):
        way = tf.function(search, input_signature=signature, jit_compile=jit)
        hyps = way(projected, lengths)
        count = hyps.label_length.numpy()
        got = [hyps.labels[b, :n].numpy().tolist() for b, n in enumerate(count)]
        if got != want:
            raise AssertionError(f"{name} differs from the numpy beam search")
        times[name] = timed(lambda w=way: w(projected, lengths), ROUNDS.value)


def recognizer_rtf():
    """(RTF of TransducerStream, RTF of RecognizerStream, utterances), 1 thread."""
    import tempfile

    import tf_transducer as tt
    from tf_transducer.data import read_manifest
    from tf_transducer.data.corpora import manifest
    from tf_transducer.decoding.keras_steps import KerasSteps
    from tf_transducer.decoding.keras_steps import encode_projected
    from tf_transducer.export import RecognizerStream
    from tf_transducer.export import TransducerStream
    from tf_transducer.export import export_recognizer
    from tf_transducer.export import export_transducer
    from tf_transducer.models import Transducer

    alphabet = tt.CharacterAlphabet.english()
    features = tt.LogMelSpectrogram(sample_rate=8000, n_mels=40)
    model = Transducer.from_preset("lstm-1m", alphabet.vocab_size, feature_dim=40)
    model.build()
    audio = [tt.data.load_audio(u.path, 8000)
             for u in read_manifest(manifest("digits_test"))]  # fmt: skip
    mels, frames = features(audio[0][None])
    projected, lengths = encode_projected(model, (mels, frames))
    blank_bias_for_rate(model, projected, lengths, KerasSteps(model))
    seconds = sum(len(a) for a in audio) / 8000
    with tempfile.TemporaryDirectory() as folder:
        four, one = f"{folder}/four", f"{folder}/one"
        export_transducer(model, four, alphabet, features)
        export_recognizer(model, one, alphabet, features)
        rtf, texts = [], []
        for stream in (TransducerStream(four), RecognizerStream(one)):
            stream.transcribe(audio[0])  # warm-up
            began = time.perf_counter()
            texts.append([stream.transcribe(a, chunk_samples=800) for a in audio])
            rtf.append((time.perf_counter() - began) / seconds)
    if texts[0] != texts[1]:
        raise AssertionError("the one-program recognizer differs from TransducerStream")
    return rtf[0], rtf[1], len(audio)


def main(argv):
    del argv
    if WORKER.value == "rtf":
        _harness.tensorflow_with_threads(1)
        print(json.dumps(recognizer_rtf()))
        return
    tf = _harness.tensorflow_with_threads(2)
    print(f"batch {BATCH.value} x {SECONDS.value:g} s, conformer-10m (random "
          f"weights), {CLASSES} classes, 2 threads; seconds per batch "
          f"(median of {ROUNDS.value}), and throughput against numpy\n")  # fmt: skip
    print("| model | labels / frame | search | s / batch | x numpy (same search) |")
    print("| --- | --- | --- | --- | --- |")
    for tdt in (False, True):
        rate, times = measure(tdt, tf)
        for name, seconds in times.items():
            base = times["numpy beam 4" if "beam" in name else "numpy"]
            print(f"| {'TDT' if tdt else 'RNN-T'} | {rate:.2f} | {name} | "
                  f"{seconds:.3f} | {base / seconds:.1f}x |",
                  flush=True)  # fmt: skip
    command = [*_harness.self_command(__spec__), "--worker=rtf"]
    child = subprocess.run(command, capture_output=True, text=True, cwd=_harness.ROOT)
    if child.returncode != 0:
        sys.stderr.write(child.stderr[-4000:])
        raise RuntimeError("the real-time factor worker failed")
    stream, recognizer, count = json.loads(child.stdout.strip().splitlines()[-1])
    print(f"\nlstm-1m (random weights), {count} digits test utterances, 100 ms "
          f"pieces, LiteRT 1 thread: real-time factor\n")  # fmt: skip
    print("| runner | RTF | x TransducerStream |")
    print("| --- | --- | --- |")
    print(f"| TransducerStream (4 programs, search in Python) | {stream:.4f} | 1.00x |")
    print(f"| RecognizerStream (1 program, search inside) | {recognizer:.4f} | "
          f"{recognizer / stream:.2f}x |")  # fmt: skip


if __name__ == "__main__":
    app.run(main)
