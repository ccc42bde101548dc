# SPDX-License-Identifier: Apache-2.0
"""Word times and confidence from labels, frames and label confidence."""

import csv
import json

import numpy as np
import pytest

from tf_transducer.data import CharacterAlphabet
from tf_transducer.data import SubwordEncoder
from tf_transducer.data.corpora import manifest
from tf_transducer.decoding import GraphHypotheses
from tf_transducer.decoding.timestamps import frame_seconds
from tf_transducer.decoding.timestamps import hypotheses_as_json
from tf_transducer.decoding.timestamps import timed_words


def test_characters_with_spaces():
    alphabet = CharacterAlphabet.english()
    labels = alphabet.encode("go on")
    frames = [2, 3, 5, 8, 9]  # g o ' ' o n
    sure = [0.9, 0.8, 0.99, 0.5, 0.7]
    words = timed_words(labels, frames, sure, alphabet, 0.04)
    assert [w.word for w in words] == ["go", "on"]
    # "on" starts at the space before it (the boundary), or at its "o"
    np.testing.assert_allclose([w.start for w in words], [0.08, 0.20])
    by_label = timed_words(labels, frames, sure, alphabet, 0.04, starts="label")
    np.testing.assert_allclose([w.start for w in by_label], [0.08, 0.32])
    np.testing.assert_allclose([w.end for w in words], [0.16, 0.40])  # last + 1 frame
    np.testing.assert_allclose([w.confidence for w in words], [0.8, 0.5])  # min
    mean = timed_words(labels, frames, sure, alphabet, 0.04, aggregate="mean")
    np.testing.assert_allclose([w.confidence for w in mean], [0.85, 0.6])


@pytest.mark.parametrize("delimiter", [False, True], ids=["pieces", "delimiter"])
def test_sentencepiece_words(delimiter):
    with open(manifest("digits_train")) as f:
        text = [row["transcript"] for row in csv.DictReader(f)]
    encoder = SubwordEncoder.train(text, vocab_size=24, word_delimiter=delimiter)
    sentence = "seven four nine"
    labels = encoder.encode(sentence)
    frames = list(range(0, 2 * len(labels), 2))
    words = timed_words(labels, frames, [1.0] * len(labels), encoder, 0.01)
    assert " ".join(w.word for w in words) == sentence
    starts = [w.start for w in words]
    # (a lone word-mark piece, or the delimiter, decodes to nothing: a word
    # starts there, or with "label" at its first label with text)
    assert starts[0] == pytest.approx(frames[0] * 0.01)
    first = next(i for i in range(len(labels)) if encoder.decode(labels[: i + 1]))
    by_label = timed_words(labels, frames, [1.0] * len(labels), encoder, 0.01,
                           starts="label")  # fmt: skip
    assert by_label[0].start == pytest.approx(frames[first] * 0.01)
    assert starts == sorted(starts)
    assert all(w.end > w.start for w in words)
    assert words[-1].end == pytest.approx((frames[-1] + 1) * 0.01)


def test_json_lines_of_hypotheses():
    alphabet = CharacterAlphabet.english()
    first, second = alphabet.encode("a b"), alphabet.encode("c")
    labels = np.zeros([2, 4], np.int32)
    labels[0, :3], labels[1, :1] = first, second
    hyps = GraphHypotheses(
        labels=labels, label_length=np.array([3, 1]),
        frames=np.array([[0, 1, 4, -1], [7, -1, -1, -1]]),
        confidence=np.array([[0.5, 1.0, 0.25, 0], [0.75, 0, 0, 0]]),
        scores=np.zeros(2), joint_evaluations=np.zeros(2),
    )  # fmt: skip
    lines = hypotheses_as_json(hyps, alphabet, frame_seconds(4, 0.01), names=["x", "y"])
    records = [json.loads(line) for line in lines]
    assert records[0] == {"file": "x", "text": "a b", "words": [
        {"word": "a", "start": 0.0, "end": 0.04, "confidence": 0.5},
        {"word": "b", "start": 0.04, "end": 0.2, "confidence": 0.25}]}  # fmt: skip
    # ("b" starts at the space before it, frame 1)
    assert records[1]["words"] == [
        {"word": "c", "start": 0.28, "end": 0.32, "confidence": 0.75}
    ]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda a: timed_words([1], [0], [1.0], a, 0.04, aggregate="max"), "aggregate"),
        (lambda a: timed_words([1, 2], [0], [1.0], a, 0.04), "as long as"),
        (lambda a: timed_words([1], [0], [1.0], a, 0.04, starts="mid"), "starts"),
        (lambda a: frame_seconds(0, 0.01), "subsampling"),
        (lambda a: frame_seconds(4, 0), "hop_seconds"),
    ],
)
def test_bad_arguments_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call(CharacterAlphabet.english())
