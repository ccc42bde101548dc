# SPDX-License-Identifier: Apache-2.0
"""export_transducer with a Conformer encoder: the streaming program's caches,
its outputs against the offline Keras encoder, transcripts, export.json."""

import json
import os

import keras
import numpy as np
import pytest
import soundfile as sf

import tf_transducer as tt
from tf_transducer.data import read_manifest
from tf_transducer.data.corpora import manifest
from tf_transducer.decoding.transducer import transducer_greedy_decode
from tf_transducer.export import TransducerStream
from tf_transducer.export import export_transducer
from tf_transducer.layers import ConformerEncoder
from tf_transducer.layers import PredictionNetwork
from tf_transducer.layers import TransducerJoiner
from tf_transducer.models import Transducer

ALPHABET = tt.CharacterAlphabet.english()
FEATURES = tt.LogMelSpectrogram(n_mels=20)


@pytest.fixture(scope="module")
def model_and_audio():
    keras.utils.set_random_seed(5)
    model = Transducer(
        ALPHABET.vocab_size,
        ConformerEncoder(
            d_model=32,
            num_layers=2,
            num_heads=2,
            conv_kernel=5,
            chunk_size=3,
            left_context=6,
            subsampling=4,
            dropout=0.0,
        ),
        PredictionNetwork(ALPHABET.vocab_size, embedding_dim=8, units=16),
        TransducerJoiner(ALPHABET.vocab_size, units=16),
        feature_dim=20,
        normalization="global",
    )
    model.build()
    paths = [u.path for u in read_manifest(manifest("librivox"))][:2]
    audio = [sf.read(path, dtype="float32")[0][:40000] for path in paths]
    mels = [FEATURES(a[None])[0][0] for a in audio]
    joined = np.concatenate(mels)[None]
    model.normalizer.adapt([(joined, np.array([len(joined[0])], np.int32))])
    return model, audio


@pytest.fixture(scope="module")
def exports(model_and_audio, tmp_path_factory):
    model, audio = model_and_audio
    folders = {}
    for mode in ("float", "dynamic", "int8"):
        folders[mode] = str(tmp_path_factory.mktemp("conformer") / mode)
        export_transducer(
            model, folders[mode], ALPHABET, FEATURES, quantization=mode,
            calibration_audio=audio if mode == "int8" else None,
        )  # fmt: skip
    return folders


def encoder_chunks(stream, audio, chunk_samples):
    """The encoder program's outputs [frames, J] while streaming audio."""
    outputs = []
    encode = stream.programs["encoder"]

    def recording(**inputs):
        out = encode(**inputs)
        outputs.append(out["encoder"][0, : -(-int(inputs["valid"][0]) // 4)])
        return out

    stream.programs["encoder"] = recording
    try:
        stream.transcribe(audio, chunk_samples=chunk_samples)
    finally:
        stream.programs["encoder"] = encode
    return np.concatenate(outputs)


def test_export_json_says_the_encoder_chunk_and_context(exports, model_and_audio):
    model, _ = model_and_audio
    with open(os.path.join(exports["float"], "export.json")) as f:
        meta = json.load(f)
    assert meta["encoder"] == "ConformerEncoder"
    assert meta["predictor_state_dtypes"] == ["float32", "float32"]
    assert (meta["chunk_size"], meta["left_context"]) == (3, 6)
    assert (meta["chunk_frames"], meta["stack"]) == (12, 4)
    shapes = [list(s.shape[1:]) for s in model.encoder.initial_state(1)]
    assert meta["encoder_state_shapes"] == shapes
    assert len(shapes) == 2 + 2 * 2  # subsampling, validity, 2 per block


@pytest.mark.parametrize("chunk_samples", [700, 4003])
def test_stream_equals_offline_encoder_and_greedy(
    exports, model_and_audio, chunk_samples
):
    model, audio = model_and_audio
    stream = TransducerStream(exports["float"], max_symbols_per_frame=3)
    for signal in audio:
        mels, frames = FEATURES(signal[None])
        encoded, lengths = model.encode((mels, frames))
        want = np.asarray(model.joiner.project_encoder(encoded))[0, : int(lengths[0])]
        got = encoder_chunks(stream, signal, chunk_samples)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=2e-5)
        offline = ALPHABET.decode(transducer_greedy_decode(model, (mels, frames), 3)[0])
        assert stream.transcribe(signal, chunk_samples=chunk_samples) == offline


# Mean error / mean size of the encoder's outputs, measured: 0.019 dynamic,
# 0.19 int8 (0.37 when masked attention scores were a -1e9 fill).
@pytest.mark.parametrize("mode, tolerance", [("dynamic", 0.05), ("int8", 0.25)])
def test_quantised_programs_stay_close_and_smaller(exports, model_and_audio, mode,
                                                   tolerance):  # fmt: skip
    _, audio = model_and_audio
    want = encoder_chunks(TransducerStream(exports["float"]), audio[0], 1600)
    got = encoder_chunks(TransducerStream(exports[mode], quantization=mode),
                         audio[0], 1600)  # fmt: skip
    assert np.abs(got - want).mean() < tolerance * np.abs(want).mean()
    sizes = {m: os.path.getsize(os.path.join(f, "encoder.tflite"))
             for m, f in exports.items()}  # fmt: skip
    assert sizes[mode] < 0.5 * sizes["float"]


def test_chunk_frames_must_fit_the_subsampling(model_and_audio, tmp_path):
    model, _ = model_and_audio
    with pytest.raises(ValueError, match=r"chunk_frames .* subsampling|stack \(4\)"):
        export_transducer(
            model, str(tmp_path / "e"), ALPHABET, FEATURES, chunk_frames=6
        )
    assert not (tmp_path / "e").exists()
