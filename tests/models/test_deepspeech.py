# SPDX-License-Identifier: Apache-2.0
"""DeepSpeech: size, overfitting a real clip (Keras and TFLite), streaming, resuming."""

import contextlib
import csv

import keras
import numpy as np
import pytest
import soundfile as sf
import tensorflow as tf

import tf_transducer as tt
from tf_transducer.data.corpora import manifest
from tf_transducer.decoding import ctc_greedy_decode
from tf_transducer.export import DeepSpeechStream
from tf_transducer.export import export_deepspeech
from tf_transducer.losses import CtcLoss
from tf_transducer.models import DeepSpeech

ALPHABET = tt.CharacterAlphabet.english()


def test_default_size_is_deepspeech_0_9():
    model = DeepSpeech()
    model.build()
    assert model.count_params() == 47_224_861
    assert model.window_size == 19 * 26


@pytest.fixture(scope="module")
def overfit():
    """n_hidden=100 trained on the shortest bundled LibriVox clip until it is exact."""
    data = tt.SpeechDataset(manifest("librivox"), ALPHABET, features=tt.Mfcc())
    i = int(np.argmin(data.durations))
    batch = next(b for b in data.dataset(1, shuffle=False) if int(b["index"][0]) == i)
    x, y = (batch["features"], batch["feature_length"]), batch["labels"]
    keras.utils.set_random_seed(1)
    model = DeepSpeech(n_hidden=100, dropout_rate=0.0)
    model.compile(
        optimizer=keras.optimizers.Adam(0.005), loss=CtcLoss(), jit_compile=False
    )
    transcript, steps = data.transcripts[i], 0
    while steps < 400:
        model.fit(x, y, epochs=25, verbose=0)
        steps += 25
        if ALPHABET.decode(ctc_greedy_decode(model(x).numpy())[0]) == transcript:
            break
    audio, rate = sf.read(data.paths[i], dtype="float32")
    assert rate == 16000
    return model, x, transcript, steps, audio


def test_overfits_a_real_clip(overfit):
    model, x, transcript, steps, _ = overfit
    got = ALPHABET.decode(ctc_greedy_decode(model(x).numpy())[0])
    assert got == transcript, f"after {steps} steps: {got!r}"


@pytest.mark.parametrize("mode", ["float", "dynamic", "int8"])
def test_its_tflite_export_transcribes_it_too(overfit, tmp_path, mode):
    model, _, transcript, _, audio = overfit
    calibration = [audio] if mode == "int8" else None
    folder = str(tmp_path / mode)
    sizes = export_deepspeech(
        model, folder, ALPHABET, quantization=mode, calibration_audio=calibration
    )
    stream = DeepSpeechStream(folder, quantization=mode)
    text, _ = stream.transcribe(audio)
    assert text == transcript, f"{mode}: {text!r}"
    if mode != "float":  # int8 weights (+ int32 biases, scales): < half of float32
        assert sizes["acoustic.tflite"] < 0.5 * 4 * model.count_params()


def offline_logits(model, audio):
    mfcc, frames = model.mfcc(audio[np.newaxis])
    return model((mfcc, frames)).numpy()[0]


def test_keras_streaming_steps_equal_the_offline_model(overfit):
    model, x, _, _, _ = overfit
    want = model(x).numpy()[0]
    windows, _ = model.context(*x)
    h = c = tf.zeros([1, model.n_hidden])
    got = []
    for start in range(0, windows.shape[1], 7):
        chunk = windows[:, start : start + 7]
        chunk = tf.pad(chunk, [[0, 0], [0, 7 - chunk.shape[1]], [0, 0]])
        logits, h, c = model.step(chunk, h, c)
        got.append(logits[0])
    got = np.concatenate(got)[: len(want)]
    np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("chunk", [1, 5, 64])
def test_tflite_acoustic_steps_equal_offline_across_chunk_boundaries(
    overfit, tmp_path, chunk
):
    # The streaming program fed the Keras model's own MFCCs, a few at a time.
    model, x, _, _, _ = overfit
    export_deepspeech(model, str(tmp_path / "export"), ALPHABET, n_steps=4)
    stream = DeepSpeechStream(str(tmp_path / "export"))
    mfcc = x[0][0].numpy()
    for start in range(0, len(mfcc), chunk):
        stream.feed_features(mfcc[start : start + chunk])
    got = stream.finish()
    want = model(x).numpy()[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=1e-4)


@pytest.mark.parametrize("chunk", [160, 1234, 7777])
def test_tflite_audio_stream_matches_offline(overfit, tmp_path, chunk):
    # From audio, TFLite's RFFT rounds differently from TensorFlow's; the
    # log of quiet mel bands magnifies that (up to ~1e-4 on an MFCC), and the
    # over-fitted model up to ~5e-4 on a logit. Same transcript.
    model, _, transcript, _, audio = overfit
    export_deepspeech(model, str(tmp_path / "export"), ALPHABET, n_steps=4)
    stream = DeepSpeechStream(str(tmp_path / "export"))
    want = offline_logits(model, audio)
    text, got = stream.transcribe(audio, chunk_samples=chunk)
    assert got.shape == want.shape and text == transcript
    np.testing.assert_allclose(got, want, atol=2e-3)


def test_export_is_all_or_nothing(overfit, tmp_path):
    model, _, _, _, _ = overfit
    target = tmp_path / "export"
    export_deepspeech(model, str(target), ALPHABET)
    before = sorted(p.name for p in target.iterdir())
    with pytest.raises(ValueError, match="n_steps must be a positive int"):
        export_deepspeech(model, str(target), ALPHABET, n_steps=0)
    assert sorted(p.name for p in target.iterdir()) == before
    assert [p.name for p in tmp_path.iterdir()] == ["export"]  # no leftovers


@contextlib.contextmanager
def cli_flags(**values):
    from absl import flags

    import tf_transducer.cli.deepspeech  # noqa: F401  (defines the flags)

    argv = ["deepspeech"] + [f"--{k}={v}" for k, v in values.items()]
    flags.FLAGS.unparse_flags()
    flags.FLAGS(argv)
    try:
        yield
    finally:
        flags.FLAGS.unparse_flags()


class Interrupt(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        if epoch == 2:
            raise KeyboardInterrupt("simulated interruption")


def test_interrupted_training_resumes_where_it_stopped(tmp_path):
    from tf_transducer.cli import deepspeech as cli

    options = dict(
        train_files=manifest("digits_dev"),
        audio_sample_rate=8000,
        n_hidden=16,
        epochs=4,
        train_batch_size=8,
        train_steps_per_epoch=2,
        checkpoint_dir=tmp_path / "run",
        early_stop=False,
    )
    with cli_flags(**options):
        with pytest.raises(KeyboardInterrupt):
            cli.train(callbacks=[Interrupt()])
        history = cli.train()
    assert len(history["loss"]) == 2  # epochs 2 and 3 only
    with open(tmp_path / "run" / "history.csv") as f:
        epochs = [int(row["epoch"]) for row in csv.DictReader(f)]
    assert epochs == [0, 1, 2, 3]
    assert (tmp_path / "run" / "best.weights.h5").is_file()


def test_audio_input_computes_the_same_mfccs_inside():
    keras.utils.set_random_seed(5)
    on_audio = DeepSpeech(n_hidden=24, audio_input=True)
    on_features = DeepSpeech(n_hidden=24)
    on_audio.build()
    on_features.build()
    on_features.set_weights(on_audio.get_weights())
    rng = np.random.default_rng(6)
    audio = (rng.normal(size=(2, 8000)) * 0.1).astype(np.float32)
    lengths = np.array([8000, 5000], np.int32)
    got = on_audio((audio, lengths))
    mfcc, frames = tt.Mfcc()(audio, lengths)
    want = on_features((mfcc, frames))
    np.testing.assert_array_equal(got._keras_mask, want._keras_mask)
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert DeepSpeech.from_config(on_audio.get_config()).get_config() == (
        on_audio.get_config()
    )
