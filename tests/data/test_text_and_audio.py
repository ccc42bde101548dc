# SPDX-License-Identifier: Apache-2.0
"""Text encoders, manifests, the resampler, the corpus script."""

import csv
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tf_transducer.data import BLANK
from tf_transducer.data import CharacterAlphabet
from tf_transducer.data import SubwordEncoder
from tf_transducer.data import load_text_encoder
from tf_transducer.data import probe
from tf_transducer.data import read_manifest
from tf_transducer.data import resample
from tf_transducer.data.corpora import make_real_digits
from tf_transducer.data.corpora import manifest


def test_alphabet_round_trip_and_blank():
    alphabet = CharacterAlphabet.english()
    ids = alphabet.encode("it's a dog")
    assert BLANK not in ids and min(ids) == 1 and alphabet.vocab_size == 29
    assert alphabet.decode(ids) == "it's a dog"
    assert alphabet.decode([0, *ids, -1, -1]) == "it's a dog"  # blank, padding


def test_alphabet_file(tmp_path):
    path = tmp_path / "alphabet.txt"
    path.write_text("# comment\n \na\nb\n\\#\n", encoding="utf-8")
    alphabet = CharacterAlphabet.from_file(str(path))
    assert alphabet.characters == [" ", "a", "b", "#"]
    alphabet.save(str(tmp_path / "copy.txt"))
    assert CharacterAlphabet.from_file(str(tmp_path / "copy.txt")).characters == [
        " ",
        "a",
        "b",
        "#",
    ]
    assert load_text_encoder(str(path)).encode("ab #") == [2, 3, 1, 4]
    path.write_text("a\nbc\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"alphabet.txt:2: expected one character"):
        CharacterAlphabet.from_file(str(path))
    path.write_text("a\na\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"characters repeat: \['a'\]"):
        CharacterAlphabet.from_file(str(path))


def test_unknown_characters_raise_or_are_dropped_and_counted():
    with pytest.raises(ValueError, match="character '!' at position 5 of 'hello!'"):
        CharacterAlphabet.english().encode("hello!")
    alphabet = CharacterAlphabet.english(drop_unknown=True)
    assert alphabet.decode(alphabet.encode("hello! ok?!")) == "hello ok"
    assert alphabet.dropped == {"!": 2, "?": 1}
    with pytest.raises(ValueError, match="id 40 is outside the alphabet"):
        alphabet.decode([40])


def test_subword_encoder_round_trip_and_config(tmp_path):
    with open(manifest("digits_train")) as f:
        text = [row["transcript"] for row in csv.DictReader(f)]
    encoder = SubwordEncoder.train(text, vocab_size=24)
    assert encoder.vocab_size == 24
    for sentence in text[:20]:
        ids = encoder.encode(sentence)
        assert BLANK not in ids
        assert encoder.decode(ids) == sentence
    again = SubwordEncoder.train(text, vocab_size=24)
    assert again.model_proto == encoder.model_proto  # deterministic
    clone = SubwordEncoder.from_config(encoder.get_config())
    assert clone.encode(text[0]) == encoder.encode(text[0])
    encoder.save(str(tmp_path / "digits.model"))
    loaded = load_text_encoder(str(tmp_path / "digits.model"))
    assert loaded.encode(text[1]) == encoder.encode(text[1])
    with pytest.raises(
        ValueError, match="SentencePiece training failed .vocab_size=500"
    ):
        SubwordEncoder.train(text, vocab_size=500)


def test_word_delimiter_separates_words_and_round_trips(tmp_path):
    with open(manifest("digits_train")) as f:
        text = [row["transcript"] for row in csv.DictReader(f)]
    words = SubwordEncoder.train(text, 13, model_type="word")  # 11 words
    encoder = SubwordEncoder.train(text, 14, model_type="word", word_delimiter=True)
    assert encoder.vocab_size == words.vocab_size + 1 == 14
    delimiter = encoder.vocab_size - 1
    ids = encoder.encode("seven seven  two")
    assert ids == [ids[0], delimiter, ids[0], delimiter, ids[4]]
    assert ids[0] != delimiter and ids[0] == words.encode("seven")[0]
    for sentence in text[:20]:
        ids = encoder.encode(sentence)
        assert ids.count(delimiter) == len(sentence.split()) - 1
        assert encoder.decode(ids) == sentence
    assert encoder.decode([0, ids[0], delimiter, delimiter, -1]) == sentence.split()[0]
    assert encoder.encode("") == []
    clone = SubwordEncoder.from_config(encoder.get_config())
    assert clone.word_delimiter and clone.encode(text[3]) == encoder.encode(text[3])
    assert "word_delimiter" not in words.get_config()  # older configs still load
    with pytest.raises(ValueError, match="id 14 is outside the vocabulary .0..13."):
        encoder.decode([14])
    with pytest.raises(ValueError, match="cannot record word_delimiter=True"):
        encoder.save(str(tmp_path / "digits.model"))
    with pytest.raises(ValueError, match="word_delimiter must be a bool, got 'yes'"):
        SubwordEncoder(encoder.model_proto, word_delimiter="yes")
    with pytest.raises(ValueError, match="word_delimiter must be a bool, got 1"):
        SubwordEncoder.train(text, 14, model_type="word", word_delimiter=1)
    sub = SubwordEncoder.train(text, 24, word_delimiter=True)
    assert sub.vocab_size == 24
    assert [sub.decode(sub.encode(t)) for t in text[:20]] == text[:20]


def test_manifests_resolve_paths_and_name_bad_lines(tmp_path):
    utterances = read_manifest(manifest("librivox_jsonl"))
    assert [u.transcript for u in utterances] == [
        u.transcript for u in read_manifest(manifest("librivox"))
    ]
    assert all(os.path.isfile(u.path) for u in utterances)
    assert utterances[1].duration == pytest.approx(2.99)
    bad = tmp_path / "m.csv"
    bad.write_text("path,text\nx.wav,hi\n")
    with pytest.raises(ValueError, match=r"missing \['transcript', 'wav_filename'\]"):
        read_manifest(str(bad))
    bad = tmp_path / "m.jsonl"
    bad.write_text('{"audio_filepath": "a.wav"}\n{oops\n')
    with pytest.raises(ValueError, match="m.jsonl:2: not JSON"):
        read_manifest(str(bad))
    with pytest.raises(ValueError, match="unknown format '.txt'"):
        (tmp_path / "m.txt").write_text("")
        read_manifest(str(tmp_path / "m.txt"))


@pytest.mark.parametrize("rates", [(22050, 16000), (8000, 16000), (44100, 8000)])
def test_resample_keeps_the_band_and_removes_aliases(rates):
    rate_in, rate_out = rates
    t = np.arange(rate_in // 2) / rate_in
    # Flat to 1e-4 up to 60% of the lower Nyquist frequency, within 0.3% at 80%.
    for f, atol in ((440.0, 1e-4), (0.3 * min(rates), 1e-4), (0.4 * min(rates), 3e-3)):
        y = resample(np.sin(2 * np.pi * f * t), rate_in, rate_out)
        assert len(y) == int(np.ceil(len(t) * rate_out / rate_in))
        want = np.sin(2 * np.pi * f * np.arange(len(y)) / rate_out)
        np.testing.assert_allclose(y[100:-100], want[100:-100], atol=atol)
    if rate_out < rate_in:
        f = 1.2 * rate_out / 2  # 20% above the output's Nyquist frequency
        y = resample(np.sin(2 * np.pi * f * t), rate_in, rate_out)
        assert np.sqrt(np.mean(y[100:-100] ** 2)) < 1e-3


def test_resample_bad_arguments():
    with pytest.raises(ValueError, match="rate_in must be a positive int"):
        resample(np.zeros(4), 0, 8000)
    with pytest.raises(ValueError, match=r"audio must be \[N\] or \[N, channels\]"):
        resample(np.zeros((2, 2, 2)), 8000, 16000)


@pytest.mark.skipif(
    not (shutil.which("espeak-ng") and shutil.which("flite")),
    reason="needs Debian's espeak-ng and flite",
)
def test_digits_corpus_regenerates_byte_for_byte():
    result = subprocess.run(
        [sys.executable, "-m", "tf_transducer.data.corpora.make_digits", "--check"],
        capture_output=True,
        text=True,
    )
    assert "0 files differ" in result.stdout, result.stdout + result.stderr


@pytest.mark.skipif(
    not all(os.path.exists(p) for p in (make_real_digits.ASTERISK,
                                        make_real_digits.TIDIGITS)),
    reason="needs Debian's asterisk-core-sounds-en-wav and pocketsphinx-testdata",
)  # fmt: skip
def test_real_digits_regenerate_byte_for_byte():
    result = subprocess.run(
        [sys.executable, "-m", "tf_transducer.data.corpora.make_real_digits",
         "--check"],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert "0 files differ" in result.stdout, result.stdout + result.stderr


def test_real_digits_are_held_out_human_recordings():
    utterances = read_manifest(manifest("digits_real"))
    assert len(utterances) == 25
    words = set(make_real_digits.WORDS) | {"oh"}
    assert all(set(u.transcript.split()) <= words for u in utterances)
    assert any("oh" in u.transcript.split() for u in utterances)
    train = {os.path.basename(u.path) for u in read_manifest(manifest("digits_train"))}
    assert not train & {os.path.basename(u.path) for u in utterances}
    rates = {probe(u.path).sample_rate for u in utterances}
    assert rates == {8000, 16000}  # the TIDIGITS file keeps its 16 kHz
