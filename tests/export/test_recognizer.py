# SPDX-License-Identifier: Apache-2.0
"""The one-program recognizer (features, encoder, search in one TFLite
program) against TransducerStream's four programs and Python search."""

import json
import os

import keras
import numpy as np
import pytest
import soundfile as sf

import tf_transducer as tt
from tf_transducer.data import read_manifest
from tf_transducer.data.corpora import manifest
from tf_transducer.export import RecognizerStream
from tf_transducer.export import TransducerStream
from tf_transducer.export import export_recognizer
from tf_transducer.export import export_transducer
from tf_transducer.layers import PredictionNetwork
from tf_transducer.layers import TransducerEncoder
from tf_transducer.layers import TransducerJoiner
from tf_transducer.models import Transducer

ALPHABET = tt.CharacterAlphabet.english()
FEATURES = tt.LogMelSpectrogram(n_mels=20, sample_rate=8000)


def model_of(durations):
    keras.utils.set_random_seed(5)
    vocab = ALPHABET.vocab_size
    model = Transducer(
        vocab,
        TransducerEncoder(24, 1, stack=2),
        PredictionNetwork(vocab, embedding_dim=8, units=16),
        TransducerJoiner(vocab, units=16, durations=durations),
        feature_dim=20,
    )
    model.build()
    kernel = model.joiner.output_projection.kernel
    kernel.assign(kernel * 6.0)  # labels as well as blanks
    if durations:
        model.joiner.duration_projection.bias.assign([0.0, 0.5, 1.0, 2.0])
    return model


@pytest.fixture(scope="module")
def voices():
    paths = [u.path for u in read_manifest(manifest("digits_test"))][:3]
    return [sf.read(path, dtype="float32")[0] for path in paths]


@pytest.mark.parametrize("durations", [None, [0, 1, 2, 3]], ids=["rnnt", "tdt"])
@pytest.mark.parametrize("chunk_frames", [8, 16])
def test_recognizer_equals_transducer_stream(tmp_path, voices, durations, chunk_frames):
    model = model_of(durations)
    four, one = str(tmp_path / "four"), str(tmp_path / "one")
    export_transducer(model, four, ALPHABET, FEATURES, chunk_frames=chunk_frames)
    export_recognizer(model, one, ALPHABET, FEATURES, chunk_frames=chunk_frames)
    with open(os.path.join(one, "export.json")) as f:
        assert sorted(json.load(f)["programs"]) == ["recognizer"]
    reference, recognizer = TransducerStream(four), RecognizerStream(one)
    emitted = 0
    for signal in voices:
        for piece in (500, 3001):
            want = reference.transcribe(signal, chunk_samples=piece)
            assert recognizer.transcribe(signal, chunk_samples=piece) == want
            assert recognizer.labels == reference.labels
        frames = recognizer.frames
        assert frames == sorted(frames) and len(frames) == len(recognizer.labels)
        assert all(0 <= c <= 1 for c in recognizer.confidence)
        emitted += len(recognizer.labels)
    assert emitted, "the model emits nothing: scale its output up"


def test_bad_inputs_are_named(tmp_path, voices):
    model = model_of(None)
    folder = str(tmp_path / "one")
    export_recognizer(model, folder, ALPHABET, FEATURES, chunk_frames=8)
    stream = RecognizerStream(folder)
    with pytest.raises(ValueError, match="16000 Hz, the export takes 8000"):
        stream.transcribe(voices[0], sample_rate=16000)
    with pytest.raises(ValueError, match="int8"):
        export_recognizer(model, str(tmp_path / "q"), ALPHABET, FEATURES,
                          quantization="int8")  # fmt: skip
    window = np.zeros(stream.meta["window_samples"], np.float32)
    shapes, dtypes = stream.meta["state_shapes"], stream.meta["state_dtypes"]
    state = [np.zeros(s, d) for s, d in zip(shapes, dtypes, strict=True)]
    with pytest.raises(ValueError, match=r"state\[1\] must have the shape \[1, 24\]"):
        stream.step(window, 8, [state[0], np.zeros([1, 3])] + state[2:])
    with pytest.raises(ValueError, match="state must hold"):
        stream.step(window, 8, state[:2])
    with pytest.raises(ValueError, match="window must hold"):
        stream.step(window[:-1], 8, state)
    with pytest.raises(ValueError, match="valid must be"):
        stream.step(window, 9, state)
    found, state = stream.step(window, 8, state)  # well formed: it runs
    assert len(state) == len(stream.meta["state_shapes"])


def test_hotwords_compiled_in_equal_the_stream_with_hotwords(tmp_path, voices):
    from tf_transducer.decoding import hotword_graph

    model = model_of(None)
    four, one = str(tmp_path / "four"), str(tmp_path / "one")
    export_transducer(model, four, ALPHABET, FEATURES, chunk_frames=8)
    plain = TransducerStream(four).transcribe(voices[0])
    # Boost the words the model nearly says: pieces of its own transcript.
    phrases = [ALPHABET.encode(w) for w in plain.split()[:3] if w] or [[1, 2]]
    graph = hotword_graph(phrases, ALPHABET.vocab_size, scores=3.0)
    export_recognizer(model, one, ALPHABET, FEATURES, chunk_frames=8, hotwords=graph)
    boosted = TransducerStream(four, hotwords=graph)
    recognizer = RecognizerStream(one)
    reference, changed = TransducerStream(four), False
    for signal in voices:
        text = boosted.transcribe(signal)
        assert recognizer.transcribe(signal) == text
        assert recognizer.labels == boosted.labels
        changed |= text != reference.transcribe(signal)
    assert changed, "the hotwords change nothing here: pick other phrases"
    with pytest.raises(ValueError, match="hotwords are made for 5 classes"):
        TransducerStream(four, hotwords=hotword_graph([[1]], 5))
