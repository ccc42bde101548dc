# SPDX-License-Identifier: Apache-2.0
"""export_transducer of a Token-and-Duration Transducer: the joiner program's
two heads, export.json's durations, and the streamed frame-skipping search
against the offline Keras one (transcripts and joiner evaluations)."""

import json
import os

import keras
import numpy as np
import pytest
import soundfile as sf

import tf_transducer as tt
from tf_transducer.data import read_manifest
from tf_transducer.data.corpora import manifest
from tf_transducer.decoding import tdt_greedy_search
from tf_transducer.decoding.transducer import KerasSteps
from tf_transducer.export import TransducerStream
from tf_transducer.export import export_transducer
from tf_transducer.layers import PredictionNetwork
from tf_transducer.layers import TransducerEncoder
from tf_transducer.layers import TransducerJoiner
from tf_transducer.models import Transducer

ALPHABET = tt.CharacterAlphabet.english()
FEATURES = tt.LogMelSpectrogram(n_mels=20)
DURATIONS = [0, 1, 2, 3, 4]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    keras.utils.set_random_seed(7)
    vocab = ALPHABET.vocab_size
    model = Transducer(
        vocab,
        TransducerEncoder(24, 1, stack=2),
        PredictionNetwork(vocab, embedding_dim=8, units=16),
        TransducerJoiner(vocab, units=16, durations=DURATIONS),
        feature_dim=20,
    )
    model.build()
    # Long jumps, so that durations cross the encoder chunks' ends.
    model.joiner.duration_projection.bias.assign([0.0, 0.5, 1.0, 2.0, 2.5])
    paths = [u.path for u in read_manifest(manifest("librivox"))][:2]
    audio = [sf.read(path, dtype="float32")[0][:30000] for path in paths]
    folder = str(tmp_path_factory.mktemp("tdt") / "float")
    export_transducer(model, folder, ALPHABET, FEATURES)
    return model, audio, folder


def offline(model, signal):
    """(labels, joiner evaluations, encoder frames) of the Keras TDT search."""
    mels, frames = FEATURES(signal[None])
    encoded, lengths = model.encode((mels, frames), training=False)
    projected = np.asarray(model.joiner.project_encoder(encoded))
    hyps, _, evaluations = tdt_greedy_search(
        projected, np.asarray(lengths), KerasSteps(model), DURATIONS
    )
    return hyps[0], int(evaluations[0]), int(lengths[0])


def test_export_json_and_the_joiner_program_have_both_heads(exported):
    model, _, folder = exported
    with open(os.path.join(folder, "export.json")) as f:
        assert json.load(f)["durations"] == DURATIONS
    stream = TransducerStream(folder)
    rng = np.random.default_rng(0)
    encoder, decoder = rng.normal(size=(2, 1, 16)).astype(np.float32)
    got = stream._steps.joint_heads(encoder, decoder)
    want = model.joiner.joint_heads(encoder, decoder)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, atol=1e-5)


@pytest.mark.parametrize("chunk_samples", [700, 4003])
def test_stream_equals_offline_and_skips_frames(exported, chunk_samples):
    model, audio, folder = exported
    stream = TransducerStream(folder)
    for signal in audio:
        labels, evaluations, frames = offline(model, signal)
        assert stream.transcribe(signal, chunk_samples=chunk_samples) == (
            ALPHABET.decode(labels)
        )
        assert stream.joint_evaluations == evaluations
        assert evaluations < frames  # the joiner ran on fewer frames than exist


def test_joint_evaluations_are_for_tdt_exports_only(tmp_path):
    vocab = ALPHABET.vocab_size
    model = Transducer(vocab, TransducerEncoder(8, 1, stack=2),
                       PredictionNetwork(vocab, 4, 8), TransducerJoiner(vocab, 8),
                       feature_dim=20)  # fmt: skip
    model.build()
    export_transducer(model, str(tmp_path / "rnnt"), ALPHABET, FEATURES)
    stream = TransducerStream(str(tmp_path / "rnnt"))
    assert stream.durations is None
    with pytest.raises(ValueError, match="TDT exports only"):
        stream.joint_evaluations  # noqa: B018
