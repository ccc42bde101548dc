# SPDX-License-Identifier: Apache-2.0
"""The transducer recipe's text encoders, with and without a word delimiter."""

import csv

import pytest

from tf_transducer.data import CharacterAlphabet
from tf_transducer.data.corpora import manifest
from tf_transducer.training import transducer_recipe as recipe


@pytest.fixture(scope="module")
def transcripts():
    with open(manifest("digits_dev")) as f:
        return [row["transcript"] for row in csv.DictReader(f)]


def test_words_with_and_without_the_delimiter(transcripts):
    plain = recipe.make_text_encoder("words", transcripts)
    delimited = recipe.make_text_encoder("words", transcripts, word_delimiter=True)
    assert delimited.vocab_size == plain.vocab_size + 1
    sentence = transcripts[0]
    assert len(delimited.encode(sentence)) == 2 * len(plain.encode(sentence)) - 1
    assert delimited.decode(delimited.encode(sentence)) == sentence
    assert not plain.word_delimiter and delimited.word_delimiter
    subwords = recipe.make_text_encoder("subwords", transcripts, 20, True)
    assert subwords.vocab_size == 20 and subwords.word_delimiter
    assert isinstance(recipe.make_text_encoder("chars", transcripts), CharacterAlphabet)


@pytest.mark.parametrize(
    "kind, word_delimiter, message",
    [
        ("chars", True, 'word_delimiter: text_encoder "chars" has one already'),
        ("words", "yes", "word_delimiter must be a bool, got 'yes'"),
        ("letters", False, "text_encoder must be one of"),
    ],
)
def test_bad_settings_are_named(transcripts, kind, word_delimiter, message):
    with pytest.raises(ValueError, match=message):
        recipe.make_text_encoder(kind, transcripts, word_delimiter=word_delimiter)
