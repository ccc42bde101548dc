# SPDX-License-Identifier: Apache-2.0
"""Throughput of the audio pipeline, and the training step it has to feed.

Side by side (benchmarks/_harness.py), each configuration in its own process
pinned to 1 or 2 cores (CPU affinity + TensorFlow's thread counts):

  * whole epochs (>= 500 s of audio) of SpeechDataset over a bundled
    corpus: decode (16-bit WAV in
    the graph for LibriVox, FLAC through soundfile for the digits) +
    LogMelSpectrogram (80 mels, 25 ms / 10 ms) + bucketed padded batches of
    16, at the corpus's own rate; reported as seconds of audio per wall
    second;
  * one training step (forward, RNN-T loss, backward, Adam) of a small
    transducer on such a batch of the digits: 80-mel features stacked 3 and
    subsampled 3, 2 x 256 LSTM encoder, embedding + 128 LSTM prediction
    network, 256 joiner, 29 characters, `RnntLoss`. This is the size planned
    for the demo; the pipeline has to deliver a batch in well under a step.

Usage: python -m benchmarks.bench_pipeline [--rounds 5]
"""

import os

from absl import app
from absl import flags

from benchmarks import _harness  # noqa: E402

ROUNDS = flags.DEFINE_integer("rounds", 5, "Timings per configuration.", lower_bound=3)
WORKER = flags.DEFINE_string("worker", None, "Internal: 'what,corpus,cores'.")

CORPORA = {"librivox": ("librivox", 16000), "digits": ("digits_train", 8000)}
BATCH = 16


def _setup(cores):
    os.sched_setaffinity(0, set(range(cores)))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(cores)
    tf.config.threading.set_inter_op_parallelism_threads(cores)
    return tf


def _dataset(tf, corpus, cores):
    from tf_transducer.data import CharacterAlphabet
    from tf_transducer.data import SpeechDataset
    from tf_transducer.data.corpora import manifest
    from tf_transducer.layers import LogMelSpectrogram

    name, rate = CORPORA[corpus]
    features = LogMelSpectrogram(sample_rate=rate, n_mels=80)
    data = SpeechDataset(manifest(name), CharacterAlphabet.english(), rate, features)
    ds = data.dataset(BATCH, seed=0, bucket_boundaries="auto")
    options = tf.data.Options()
    options.threading.private_threadpool_size = cores
    return data, ds.with_options(options)


def serve_pipeline(corpus, cores):
    tf = _setup(cores)
    data, ds = _dataset(tf, corpus, cores)
    # Whole epochs, at least 500 s of audio per timing, so that starting an
    # iterator does not dominate on the 25 s LibriVox corpus.
    epochs = -(-500 // int(sum(data.durations)))
    ds = ds.repeat(epochs)
    batches = sum(1 for _ in ds)

    def run():
        for _ in ds:
            pass

    _harness.serve(
        run,
        report=lambda: {
            "audio_seconds": epochs * sum(data.durations),
            "batches": batches,
        },
    )


def _transducer(keras, vocab):
    from tf_transducer.layers import FrameStacking

    features = keras.Input((None, 80))
    frames = keras.Input((), dtype="int32")
    context = keras.Input((None,), dtype="int32")
    stacked, _ = FrameStacking(0, 2, stride=3)(features, frames)
    enc = keras.layers.LSTM(256, return_sequences=True)(stacked)
    enc = keras.layers.LSTM(256, return_sequences=True)(enc)
    dec = keras.layers.Embedding(vocab, 64)(context)
    dec = keras.layers.LSTM(128, return_sequences=True)(dec)
    joint = (
        keras.layers.Dense(256)(enc)[:, :, None, :]
        + keras.layers.Dense(256)(dec)[:, None, :, :]
    )
    logits = keras.layers.Dense(vocab)(keras.ops.tanh(joint))
    return keras.Model([features, frames, context], logits)


def serve_train_step(corpus, cores):
    tf = _setup(cores)
    import keras

    import tf_transducer as tt

    data, ds = _dataset(tf, corpus, cores)
    batch = next(iter(ds))
    labels = batch["labels"]
    context = tf.pad(tf.maximum(labels, 0), [[0, 0], [1, 0]])
    model = _transducer(keras, 29)
    optimizer = keras.optimizers.Adam(1e-3)
    loss_fn = tt.RnntLoss()
    inputs = (batch["features"], batch["feature_length"], context)

    @tf.function(jit_compile=False)
    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(inputs, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    _harness.serve(lambda: step().numpy())


def main(argv):
    del argv
    if WORKER.value:
        what, corpus, cores = WORKER.value.split(",")
        serve = serve_pipeline if what == "pipeline" else serve_train_step
        serve(corpus, int(cores))
        return
    cases = [("pipeline", c, n) for c in CORPORA for n in (1, 2)]
    cases += [("train_step", "digits", 2)]
    commands = {
        case: [*_harness.self_command(__spec__), "--worker=" + ",".join(map(str, case))]
        for case in cases
    }
    seconds, reports = _harness.run_interleaved(commands, ROUNDS.value)
    print(f"medians of {ROUNDS.value} interleaved rounds\n")
    print(
        "| corpus | cores | s per timing | audio s | x real time "
        "| x real time per core |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    per_batch = {}
    for what, corpus, cores in cases:
        if what != "pipeline":
            continue
        key = what, corpus, cores
        audio = reports[key]["audio_seconds"]
        speed = audio / seconds[key]
        per_batch[corpus, cores] = seconds[key] / reports[key]["batches"]
        print(
            f"| {corpus} | {cores} | {seconds[key]:.3f} | {audio:.0f} | {speed:.0f} | "
            f"{speed / cores:.0f} |"
        )
    step = seconds["train_step", "digits", 2]
    print(f"\ntraining step on a digits batch of {BATCH}, 2 cores: {step * 1e3:.1f} ms")
    for cores in (1, 2):
        ratio = step / per_batch["digits", cores]
        ms = per_batch["digits", cores] * 1e3
        print(
            f"pipeline, digits, {cores} core(s): {ms:.1f} "
            f"ms per batch = step / {ratio:.1f}"
        )


if __name__ == "__main__":
    app.run(main)
