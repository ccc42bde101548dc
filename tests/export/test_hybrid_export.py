# SPDX-License-Identifier: Apache-2.0
"""A hybrid Transducer's export: the encoder program gives the CTC head's
logits (equal to Keras' on the test voices), and `TransducerStream(...,
decoder="ctc")` decodes them as the Keras model's CTC best path."""

import json
import os

import keras
import numpy as np
import pytest
import soundfile as sf

import tf_transducer as tt
from tf_transducer.data import read_manifest
from tf_transducer.data.corpora import manifest
from tf_transducer.decoding import transducer_ctc_decode
from tf_transducer.export import TransducerStream
from tf_transducer.export import export_transducer
from tf_transducer.layers import PredictionNetwork
from tf_transducer.layers import TransducerEncoder
from tf_transducer.layers import TransducerJoiner
from tf_transducer.models import Transducer

ALPHABET = tt.CharacterAlphabet.english()
FEATURES = tt.LogMelSpectrogram(n_mels=20, sample_rate=8000)


def hybrid_model(ctc_weight=0.3):
    keras.utils.set_random_seed(8)
    vocab = ALPHABET.vocab_size
    model = Transducer(
        vocab,
        TransducerEncoder(24, 1, stack=2),
        PredictionNetwork(vocab, embedding_dim=8, units=16),
        TransducerJoiner(vocab, units=16),
        feature_dim=20,
        ctc_weight=ctc_weight,
    )
    model.build()
    if model.ctc_head is not None:
        kernel = model.ctc_head.kernel
        kernel.assign(kernel * 8.0)  # labels as well as blanks
    return model


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    model = hybrid_model()
    folder = str(tmp_path_factory.mktemp("hybrid") / "float")
    export_transducer(model, folder, ALPHABET, FEATURES, chunk_frames=8)
    paths = [u.path for u in read_manifest(manifest("digits_test"))][:3]
    voices = [sf.read(path, dtype="float32")[0] for path in paths]
    return model, folder, voices


def keras_ctc(model, signal):
    """(CTC logits [T', V], labels) of the Keras model on one signal."""
    mels, frames = FEATURES(signal[None])
    logits, lengths = model.ctc_logits((mels, frames))
    labels = transducer_ctc_decode(model, (mels, frames))[0]
    return np.asarray(logits)[0, : int(lengths[0])], labels


def test_the_encoder_program_gives_the_ctc_head_logits(exported):
    model, folder, voices = exported
    with open(os.path.join(folder, "export.json")) as f:
        assert json.load(f)["ctc_head"] is True
    stream = TransducerStream(folder)
    meta = stream.meta
    for signal in voices:
        want, _ = keras_ctc(model, signal)
        features = stream.programs["features"](audio=signal[None])["features"][0]
        chunk, got = meta["chunk_frames"], []
        states = [np.zeros([1, *s], np.float32) for s in meta["encoder_state_shapes"]]
        for start in range(0, len(features), chunk):
            piece = features[start : start + chunk]
            valid = len(piece)
            piece = np.pad(piece, [[0, chunk - valid], [0, 0]])
            out = stream.programs["encoder"](
                features=piece[None], valid=np.array([valid], np.int32),
                **{f"state_{i}": s for i, s in enumerate(states)},
            )  # fmt: skip
            states = [out[f"new_state_{i}"] for i in range(len(states))]
            got.append(out["ctc_logits"][0, : -(-valid // meta["stack"])])
        np.testing.assert_allclose(np.concatenate(got), want, atol=2e-4)


@pytest.mark.parametrize("piece", [500, 3001])
def test_the_ctc_stream_equals_the_keras_best_path(exported, piece):
    model, folder, voices = exported
    stream = TransducerStream(folder, decoder="ctc")
    emitted = 0
    for signal in voices:
        _, labels = keras_ctc(model, signal)
        text = stream.transcribe(signal, chunk_samples=piece)
        assert stream.labels == labels and text == ALPHABET.decode(labels)
        assert stream.frames == sorted(stream.frames)
        assert all(0 <= c <= 1 for c in stream.confidence)
        emitted += len(labels)
    assert emitted, "the CTC head emits nothing: scale it up"


def test_decoder_ctc_needs_a_hybrid_export(tmp_path, exported):
    folder = str(tmp_path / "plain")
    export_transducer(hybrid_model(0.0), folder, ALPHABET, FEATURES)
    with open(os.path.join(folder, "export.json")) as f:
        assert "ctc_head" not in json.load(f)
    with pytest.raises(ValueError, match='decoder="ctc": the export in .* no CTC head'):
        TransducerStream(folder, decoder="ctc")
    with pytest.raises(ValueError, match="decoder must be"):
        TransducerStream(exported[1], decoder="attention")
