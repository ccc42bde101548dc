# SPDX-License-Identifier: Apache-2.0
"""Transducer greedy and beam search against exact references, and LM fusion.

The searches only see step functions; here those read a table of joiner
logits indexed by (utterance, frame, labels emitted so far, last label), so
every alignment's probability can be summed exactly by a small dynamic
program.
"""

import itertools

import numpy as np
import pytest

from tf_transducer.data import CharacterAlphabet
from tf_transducer.decoding import ArpaModel
from tf_transducer.decoding import WordScorer
from tf_transducer.decoding.transducer import beam_search
from tf_transducer.decoding.transducer import greedy_search
from tf_transducer.decoding.transducer import modified_beam_search


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


class TableSteps:
    """Step functions with joiner logits table[b, t, n, last]: [B, T, N, V, V].

    The encoder frame (b, t) is the vector [b, t]; the decoder output and
    state are [labels so far, last label] (the blank id before any label).
    """

    def __init__(self, table):
        self.table = np.asarray(table, np.float32)

    def start(self, batch):
        out = np.zeros([batch, 2], np.float32)
        return out, [out]

    def predict(self, labels, state):
        out = np.stack([state[0][:, 0] + 1, np.asarray(labels, np.float32)], 1)
        return out, [out]

    def joint(self, encoder, decoder):
        b, t = encoder[:, 0].astype(int), encoder[:, 1].astype(int)
        n = np.minimum(decoder[:, 0].astype(int), self.table.shape[2] - 1)
        return self.table[b, t, n, decoder[:, 1].astype(int)]


def frames(batch, num):
    """[B, T, 2] encoder input of TableSteps."""
    b, t = np.meshgrid(np.arange(batch), np.arange(num), indexing="ij")
    return np.stack([b, t], -1).astype(np.float32)


def path_sum(table, labels, one_per_frame):
    """log P(labels | one utterance's table [T, N, V, V]), all alignments, float64.

    one_per_frame: modified beam search's topology (each frame emits one
    label or a blank and moves on); otherwise the standard transducer one
    (a frame emits labels until a blank moves on to the next frame).
    """
    lp = log_softmax(np.asarray(table, np.float64))
    T, U = len(lp), len(labels)

    def arc(t, u, k):
        return lp[t, min(u, lp.shape[1] - 1), labels[u - 1] if u else 0, k]

    alpha = np.full((T + 1, U + 1), -np.inf)
    alpha[0, 0] = 0.0
    for t in range(T):
        for u in range(U + 1):
            if not one_per_frame and u:
                emit = alpha[t, u - 1] + arc(t, u - 1, labels[u - 1])
                alpha[t, u] = np.logaddexp(alpha[t, u], emit)
            alpha[t + 1, u] = np.logaddexp(alpha[t + 1, u], alpha[t, u] + arc(t, u, 0))
            if one_per_frame and u < U:
                emit = alpha[t, u] + arc(t, u, labels[u])
                alpha[t + 1, u + 1] = np.logaddexp(alpha[t + 1, u + 1], emit)
    return alpha[T, U]


def label_sequences(max_len, vocab):
    return [
        c
        for n in range(max_len + 1)
        for c in itertools.product(range(1, vocab), repeat=n)
    ]


def random_table(seed, batch=1, T=4, V=3, scale=2.0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(batch, T, T + 2, V, V)) * scale


@pytest.mark.parametrize("seed", range(8))
def test_wide_modified_beam_finds_the_most_probable_labelling(seed):
    table = random_table(seed)
    candidates = label_sequences(4, 3)
    scores = [path_sum(table[0], c, one_per_frame=True) for c in candidates]
    labels, score = modified_beam_search(frames(1, 4)[0], TableSteps(table), beam=64)
    assert tuple(labels) == candidates[int(np.argmax(scores))]
    assert score == pytest.approx(max(scores), abs=1e-4)


@pytest.mark.parametrize("seed", range(8))
def test_wide_standard_beam_finds_the_most_probable_labelling(seed):
    table = random_table(50 + seed, T=3)
    candidates = label_sequences(5, 3)
    scores = [path_sum(table[0], c, one_per_frame=False) for c in candidates]
    labels, _ = beam_search(
        frames(1, 3)[0], TableSteps(table), beam=32, max_expansions=200
    )
    assert tuple(labels) == candidates[int(np.argmax(scores))]


@pytest.mark.parametrize("max_symbols", [1, 2, 3])
def test_batched_greedy_equals_one_by_one(max_symbols):
    table = random_table(7, batch=3, T=6, V=4, scale=3.0)
    table[..., 0] -= 1.0  # more labels than blanks: several per frame
    lengths = np.array([6, 2, 0])
    steps = TableSteps(table)
    hyps, scores = greedy_search(frames(3, 6), lengths, steps, max_symbols)
    for b, n in enumerate(lengths):
        one, one_score = greedy_search(
            frames(3, 6)[b : b + 1, :n], [n], steps, max_symbols
        )
        assert hyps[b] == one[0]
        assert scores[b] == pytest.approx(one_score[0], abs=1e-5)
    assert hyps[2] == [] and scores[2] == 0.0
    assert len(hyps[0]) <= 6 * max_symbols


@pytest.mark.parametrize("max_symbols", [1, 2, 5])
def test_greedy_stops_at_max_symbols_per_frame(max_symbols):
    table = random_table(3, T=4, V=4)
    table[..., 0] = -50.0  # the blank never wins
    hyps, _ = greedy_search(frames(1, 4), [4], TableSteps(table), max_symbols)
    assert len(hyps[0]) == 4 * max_symbols


def spelling_table(alphabet, spelling):
    """One frame per character: it is emitted with a margin, then a blank."""
    ids = {c: alphabet.encode(c)[0] for c in set("".join(spelling)) - {"|"}}
    V = alphabet.vocab_size
    table = np.full((1, len(spelling), len(spelling) + 2, V, V), -8.0)
    for t, chars in enumerate(spelling):
        table[0, t, :, :, 0] = 0.0  # after this frame's label: blank
        table[0, t, t, :, 0] = -8.0
        for rank, c in enumerate(chars.split("|")):
            table[0, t, t, :, ids[c]] = 0.3 * rank  # later spellings: more likely
    return table


@pytest.mark.parametrize("search", [modified_beam_search, beam_search])
def test_language_model_decides_between_close_spellings(arpa, search):
    alphabet = CharacterAlphabet(list(" abct"))
    # "a cat" vs "a cab": the acoustics slightly prefer the b.
    table = spelling_table(alphabet, ["a", " ", "c", "a", "t|b"])
    steps, encoder = TableSteps(table), frames(1, 5)[0]
    without, _ = search(encoder, steps, beam=8)
    assert alphabet.decode(without) == "a cab"
    scorer = WordScorer(ArpaModel(arpa), alphabet)
    with_lm, _ = search(encoder, steps, beam=8, scorer=scorer, alpha=1.0, beta=0.0)
    assert alphabet.decode(with_lm) == "a cat"


class Pieces:
    """A SentencePiece-like encoder: "_" starts a word."""

    PIECES = {1: "_a", 2: "_ca", 3: "t", 4: "b"}

    def decode(self, labels):
        return "".join(self.PIECES[y] for y in labels).replace("_", " ").strip()


def test_word_scorer_with_subword_pieces(arpa):
    lm = ArpaModel(arpa)
    scorer = WordScorer(lm, Pieces())
    hyp, prefix = scorer.start(), ()
    words_seen = []
    for label in (1, 2, 3):  # "a", then "ca" + "t"
        scorer.extend(hyp, prefix, label)
        prefix += (label,)
        words_seen.append(hyp.words)
    assert words_seen == [0, 1, 1]  # "a" is scored once "_ca" starts a new word
    scorer.finish(hyp, prefix)
    state, expected = lm.begin_state(), 0.0
    for word in ("a", "cat"):
        log10, state = lm.score(state, word)
        expected += log10
    expected += lm.end_score(state)
    assert hyp.words == 2
    assert hyp.score == pytest.approx(expected * np.log(10))
