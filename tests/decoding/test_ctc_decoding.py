# SPDX-License-Identifier: Apache-2.0
"""CTC greedy and beam search, language models, error rates."""

import itertools

import numpy as np
import pytest

from tf_transducer.data import CharacterAlphabet
from tf_transducer.decoding import ArpaModel
from tf_transducer.decoding import KenLMModel
from tf_transducer.decoding import WordScorer
from tf_transducer.decoding import char_error_rate
from tf_transducer.decoding import ctc_beam_search
from tf_transducer.decoding import ctc_greedy_decode
from tf_transducer.decoding import edit_distance
from tf_transducer.decoding import word_error_rate


def ctc_log_prob(log_probs, labels, blank=0):
    """log P(labels | frames) by the CTC forward algorithm, float64."""
    ext = [blank]
    for label in labels:
        ext += [label, blank]
    alpha = np.full(len(ext), -np.inf)
    alpha[0] = log_probs[0, blank]
    if len(ext) > 1:
        alpha[1] = log_probs[0, ext[1]]
    for t in range(1, len(log_probs)):
        new = np.full(len(ext), -np.inf)
        for s, k in enumerate(ext):
            terms = [alpha[s]] + ([alpha[s - 1]] if s else [])
            if s >= 2 and k != blank and k != ext[s - 2]:
                terms.append(alpha[s - 2])
            new[s] = np.logaddexp.reduce(terms) + log_probs[t, k]
        alpha = new
    return np.logaddexp(alpha[-1], alpha[-2]) if len(ext) > 1 else alpha[-1]


def log_softmax(x):
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_greedy_merges_repeats_and_drops_blanks():
    best = [0, 3, 3, 0, 3, 1, 1, 0, 2]
    logits = np.eye(4)[best][None] * 5
    assert ctc_greedy_decode(logits) == [[3, 3, 1, 2]]
    assert ctc_greedy_decode(logits, [5]) == [[3, 3]]


@pytest.mark.parametrize("seed", range(10))
def test_beam_one_is_greedy(seed):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(4, 30, 7)) * rng.uniform(0.3, 4)
    lengths = [30, 22, 5, 0]
    assert ctc_beam_search(logits, lengths, beam_width=1) == ctc_greedy_decode(
        logits, lengths
    )


@pytest.mark.parametrize("seed", range(10))
def test_wide_beam_finds_the_most_probable_labelling(seed):
    rng = np.random.default_rng(100 + seed)
    T, C = 5, 3
    logits = rng.normal(size=(T, C)) * 2
    log_probs = log_softmax(logits)
    candidates = [
        list(c) for n in range(T + 1) for c in itertools.product(range(1, C), repeat=n)
    ]
    scores = [ctc_log_prob(log_probs, c) for c in candidates]
    best = candidates[int(np.argmax(scores))]
    assert ctc_beam_search(logits[None], beam_width=200)[0] == best


def test_arpa_model_backs_off(arpa):
    lm = ArpaModel(arpa)
    state = lm.begin_state()
    p, state = lm.score(state, "a")
    assert p == pytest.approx(-0.2)
    p, state = lm.score(state, "cat")
    assert p == pytest.approx(-0.1)
    assert lm.end_score(state) == pytest.approx(-0.3)
    p, _ = lm.score(("a",), "cab")  # no bigram: back-off(a) + P(cab)
    assert p == pytest.approx(-0.3 - 0.9)
    p, _ = lm.score(("a",), "dog")  # unknown word
    assert p == pytest.approx(-0.3 - 3.0)


def test_language_model_decides_between_close_spellings(arpa):
    alphabet = CharacterAlphabet(list(" abct"))
    ids = {c: alphabet.encode(c)[0] for c in " abct"}
    # "a cat" vs "a cab": the acoustics slightly prefer the b.
    frames = ["a", " ", "c", "a", "t|b"]
    logits = np.full((len(frames), alphabet.vocab_size), -8.0)
    for t, f in enumerate(frames):
        if f == "t|b":
            logits[t, ids["t"]], logits[t, ids["b"]] = 0.0, 0.3
        else:
            logits[t, ids[f]] = 0.0
    without = ctc_beam_search(logits[None], beam_width=8)[0]
    assert alphabet.decode(without) == "a cab"
    scorer = WordScorer(ArpaModel(arpa), alphabet)
    with_lm = ctc_beam_search(
        logits[None], beam_width=8, scorer=scorer, alpha=1.0, beta=0.0
    )
    assert alphabet.decode(with_lm[0]) == "a cat"


def test_kenlm_and_arpa_models_agree(arpa):
    pytest.importorskip("kenlm")
    ken, plain = KenLMModel(arpa), ArpaModel(arpa)
    for words in (["a", "cat"], ["cab", "a"], ["a", "dog", "cat"]):
        s1, s2 = ken.begin_state(), plain.begin_state()
        for w in words:
            p1, s1 = ken.score(s1, w)
            p2, s2 = plain.score(s2, w)
            assert p1 == pytest.approx(p2, abs=1e-5), (words, w)
        assert ken.end_score(s1) == pytest.approx(plain.end_score(s2), abs=1e-5)


def test_bad_language_model_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="language model 'nope.arpa'"):
        ArpaModel("nope.arpa")
    bad = tmp_path / "bad.arpa"
    bad.write_text("\\data\\\n\\1-grams:\n-1.0\n")
    with pytest.raises(ValueError, match="bad.arpa:3: not an ARPA n-gram line"):
        ArpaModel(str(bad))


def test_kenlm_names_the_file_it_cannot_read(tmp_path):
    pytest.importorskip("kenlm")
    bad = tmp_path / "unigram.arpa"
    bad.write_text("\\data\\\nngram 1=1\n\n\\1-grams:\n-1.0\ta\n\n\\end\\\n")
    with pytest.raises(ValueError, match="unigram.arpa'.*KenLM cannot read it"):
        KenLMModel(str(bad))


def test_error_rates():
    assert edit_distance("kitten", "sitting") == 3
    assert word_error_rate(["a b c d", "e f"], ["a x c", "e f g"]) == pytest.approx(
        3 / 6
    )
    assert char_error_rate(["abcd"], ["abd"]) == pytest.approx(1 / 4)
    assert word_error_rate([""], [""]) == 0.0
    with pytest.raises(ValueError, match="2 references but 1 hypotheses"):
        word_error_rate(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="beam_width must be an int >= 1"):
        ctc_beam_search(np.zeros((1, 2, 3)), beam_width=0)
