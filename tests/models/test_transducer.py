# SPDX-License-Identifier: Apache-2.0
"""Transducer: overfitting real clips (FastEmit), streaming, beams, save/load."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import soundfile as sf

import tf_transducer as tt
from tf_transducer.data.corpora import manifest
from tf_transducer.data.text import save_text_encoder_json
from tf_transducer.decoding.transducer import KerasSteps
from tf_transducer.decoding.transducer import greedy_search
from tf_transducer.decoding.transducer import modified_beam_search
from tf_transducer.decoding.transducer import transducer_beam_search
from tf_transducer.decoding.transducer import transducer_greedy_decode
from tf_transducer.export import TransducerStream
from tf_transducer.export import export_transducer
from tf_transducer.layers import PredictionNetwork
from tf_transducer.layers import TransducerEncoder
from tf_transducer.layers import TransducerJoiner
from tf_transducer.losses import RnntLoss
from tf_transducer.models import Transducer
from tf_transducer.training import transducer_recipe as recipe

ALPHABET = tt.CharacterAlphabet.english()
# An over-fitted model emits labels in bursts, several per frame.
SYMBOLS = 10


def two_clips():
    """The two shortest bundled LibriVox clips as one padded batch of 40 mels."""
    features = tt.LogMelSpectrogram(n_mels=40)
    data = tt.SpeechDataset(manifest("librivox"), ALPHABET, features=features)
    keep = np.argsort(data.durations)[:2]
    batch = next(iter(data.dataset(5, shuffle=False)))
    rows = [int(np.flatnonzero(batch["index"].numpy() == k)[0]) for k in keep]
    x = (batch["features"].numpy()[rows], batch["feature_length"].numpy()[rows])
    y = batch["labels"].numpy()[rows]
    y = y[:, : max((y >= 0).sum(axis=1))]
    return (
        x,
        y,
        [data.transcripts[k] for k in keep],
        [data.paths[k] for k in keep],
        features,
    )


@pytest.fixture(scope="module")
def overfit():
    x, y, texts, paths, features = two_clips()
    keras.utils.set_random_seed(3)
    model = Transducer(
        ALPHABET.vocab_size,
        TransducerEncoder(units=128, stack=3),
        PredictionNetwork(ALPHABET.vocab_size, embedding_dim=32, units=64, kind="lstm"),
        TransducerJoiner(ALPHABET.vocab_size, units=64),
        feature_dim=40,
        normalization="global",
    )
    model.build()
    model.normalizer.adapt([x])
    # Left alone, an over-fitted transducer holds its last labels back past
    # the last frames, where greedy search cannot follow: FastEmit pulls
    # emissions earlier. (PrunedRnntLoss(s_range=5, delay_penalty=0.05)
    # overfit them too when this test also ran it; tests/test_pruned_loss.py
    # and the command-line tests train with it.)
    loss = RnntLoss(fastemit_lambda=0.01)
    model.compile(optimizer=keras.optimizers.Adam(0.005, clipnorm=5.0), loss=loss)
    steps = 0
    while steps < 1000:
        epochs = 400 if steps == 0 else 100
        model.fit(x, y, epochs=epochs, verbose=0)
        steps += epochs
        hyps = transducer_greedy_decode(model, x, SYMBOLS)
        if [ALPHABET.decode(h) for h in hyps] == texts:
            break
    return model, x, texts, steps, paths, features


@pytest.mark.slow  # the overfit fixture trains for about 100 s
def test_overfits_real_clips(overfit):
    model, x, texts, steps, _, _ = overfit
    got = [ALPHABET.decode(h) for h in transducer_greedy_decode(model, x, SYMBOLS)]
    assert got == texts, f"after {steps} steps: {got}"


@pytest.fixture(scope="module")
def exports(overfit, tmp_path_factory):
    """{mode: export folder} of the overfit model, float, dynamic and int8."""
    model, _, _, _, paths, features = overfit
    calibration = [sf.read(path, dtype="float32")[0] for path in paths]
    folders, sizes = {}, {}
    for mode in ("float", "dynamic", "int8"):
        folders[mode] = str(tmp_path_factory.mktemp("export") / mode)
        sizes[mode] = export_transducer(
            model,
            folders[mode],
            ALPHABET,
            features,
            chunk_frames=9,
            quantization=mode,
            calibration_audio=calibration if mode == "int8" else None,
        )
    return folders, sizes


@pytest.mark.slow  # the overfit fixture trains for about 100 s
@pytest.mark.parametrize("chunk", [400, 1777])
def test_tflite_stream_equals_offline_greedy(overfit, exports, chunk):
    model, _, _, _, paths, features = overfit
    folders, _ = exports
    streams = {
        mode: TransducerStream(folder, max_symbols_per_frame=SYMBOLS)
        for mode, folder in folders.items()
    }
    for path in paths:
        audio, _ = sf.read(path, dtype="float32")
        mels, frames = features(audio[None])
        offline = ALPHABET.decode(
            transducer_greedy_decode(model, (mels, frames), SYMBOLS)[0]
        )
        got = {m: s.transcribe(audio, chunk_samples=chunk) for m, s in streams.items()}
        assert got["float"] == offline
        assert got["dynamic"] == offline  # int8 weights, float features: no loss
        assert isinstance(got["int8"], str)  # full integer: close, not exact


@pytest.mark.slow  # the overfit fixture trains for about 100 s
def test_quantised_exports_record_their_mode_and_are_smaller(exports):
    folders, sizes = exports
    for mode, folder in folders.items():
        with open(os.path.join(folder, "export.json")) as f:
            meta = json.load(f)
        assert meta["quantization"] == mode
        quantised = "float" if mode == "float" else mode
        assert meta["programs"] == {
            "features": "float",  # DFT and mel constants are never quantised
            "encoder": quantised,
            "predictor": quantised,
            "joiner": "float",
        }
        assert TransducerStream(folder).quantization == mode
    for mode in ("dynamic", "int8"):
        assert sum(sizes[mode].values()) < 0.35 * sum(sizes["float"].values())
        assert sizes[mode]["features.tflite"] == sizes["float"]["features.tflite"]
    with pytest.raises(ValueError, match="holds dynamic programs, not int8 ones"):
        TransducerStream(folders["dynamic"], quantization="int8")


@pytest.mark.slow  # the overfit fixture trains for about 100 s
def test_beam_one_is_greedy_and_wider_beams_score_no_lower(overfit):
    model, x, _, _, _, _ = overfit
    encoded, lengths = model.encode(x)
    projected = np.asarray(model.joiner.project_encoder(encoded))
    steps = KerasSteps(model)
    greedy, greedy_scores = greedy_search(
        projected, lengths, steps, max_symbols_per_frame=1
    )
    for b, n in enumerate(np.asarray(lengths)):
        one, _ = modified_beam_search(projected[b, :n], steps, beam=1)
        assert one == greedy[b]
        _, wide_score = modified_beam_search(projected[b, :n], steps, beam=4)
        assert wide_score >= greedy_scores[b] - 1e-5  # float32 sums of log-probs
    standard = transducer_beam_search(model, x, beam=3, method="standard")
    assert len(standard) == 2 and all(standard)


@pytest.mark.slow  # the overfit fixture trains for about 100 s
def test_save_and_load_give_identical_outputs(overfit, tmp_path):
    model, x, _, _, _, _ = overfit
    model.save(tmp_path / "model.keras")
    loaded = keras.models.load_model(tmp_path / "model.keras", compile=False)
    np.testing.assert_array_equal(loaded(x)["encoder"], model(x)["encoder"])
    assert transducer_greedy_decode(loaded, x, SYMBOLS) == transducer_greedy_decode(
        model, x, SYMBOLS
    )


def test_mirrored_strategy_step_equals_one_device():
    script = os.path.join(os.path.dirname(__file__), "transducer_mirrored_check.py")
    out = subprocess.run([sys.executable, script], capture_output=True, text=True,
                         timeout=300, check=True)  # fmt: skip
    mirrored, single, weights = map(float, out.stdout.split()[-3:])
    assert abs(mirrored - single) <= 1e-5 * max(1.0, abs(single))
    assert weights < 1e-5


def test_bad_inputs_are_named(tmp_path):
    x, y, _, paths, features = two_clips()
    model = Transducer(
        12,
        TransducerEncoder(units=8),
        PredictionNetwork(12, embedding_dim=4, units=8),
        TransducerJoiner(12, units=8),
        feature_dim=40,
    )
    model.build()
    run = tmp_path / "run"
    run.mkdir()
    model.save(run / "best.keras")
    save_text_encoder_json(ALPHABET, str(run / "text_encoder.json"))
    with pytest.raises(ValueError, match="has 29 classes but the model .* has 12"):
        recipe.load_checkpoint(str(run))
    with pytest.raises(FileNotFoundError, match="holds no checkpoint"):
        recipe.load_checkpoint(str(tmp_path))
    with pytest.raises(
        ValueError, match=r"longer than the model's limit \(max_duration 2"
    ):
        recipe.speech_data([manifest("librivox")], ALPHABET, 16000, 40, 2.0)
    ds_export = tmp_path / "deepspeech"
    from tf_transducer.export import export_deepspeech
    from tf_transducer.models import DeepSpeech

    deepspeech = DeepSpeech(n_hidden=8)
    deepspeech.build()
    export_deepspeech(deepspeech, str(ds_export), ALPHABET)
    with pytest.raises(ValueError, match="not of a Transducer"):
        TransducerStream(str(ds_export))
    with pytest.raises(ValueError, match="chunk_frames must be a positive multiple"):
        export_transducer(
            model, str(tmp_path / "e"), ALPHABET, features, chunk_frames=4
        )
    assert not (tmp_path / "e").exists()
    del x, y, paths
