# SPDX-License-Identifier: Apache-2.0
"""TDT greedy and beam search on tables of joint logits, against exact references.

The step functions read token logits tokens[b, t, n, last] and duration
logits durs[b, t, n, last] (n: labels so far, last: the last label), so a
one-utterance loop and an enumeration of every decoding path can check the
batched, frame-skipping searches.
"""

import numpy as np
import pytest

from tests.decoding.test_transducer_decoding import TableSteps
from tests.decoding.test_transducer_decoding import frames
from tests.decoding.test_transducer_decoding import log_softmax
from tf_transducer.decoding import tdt_beam_search
from tf_transducer.decoding import tdt_greedy_search

V, N = 4, 6  # classes (0 = blank), label counts the tables tell apart


class TdtTableSteps(TableSteps):
    """TableSteps (test_transducer_decoding) with a duration head."""

    def __init__(self, tokens, durs):
        super().__init__(tokens)
        self.tokens = self.table
        self.durs = np.asarray(durs, np.float32)
        self.evaluated = []  # (b, t) of every joint evaluation

    def joint_heads(self, encoder, decoder):
        b, t = encoder[:, 0].astype(int), encoder[:, 1].astype(int)
        n = np.minimum(decoder[:, 0].astype(int), N - 1)
        last = decoder[:, 1].astype(int)
        self.evaluated += list(zip(b.tolist(), t.tolist(), strict=True))
        return self.tokens[b, t, n, last], self.durs[b, t, n, last]


def tables(batch, num_frames, k, seed):
    rng = np.random.default_rng(seed)
    tokens = rng.normal(size=(batch, num_frames, N, V, V)) * 2
    durs = rng.normal(size=(batch, num_frames, N, V, k)) * 2
    return tokens, durs


def greedy_by_hand(tokens, durs, durations, length, max_symbols):
    """One utterance: (labels, score, frames evaluated) by the documented rules."""
    t, run, labels, score, seen = 0, 0, [], 0.0, []
    while t < length:
        n, last = min(len(labels), N - 1), labels[-1] if labels else 0
        lp, dlp = log_softmax(tokens[t, n, last]), log_softmax(durs[t, n, last])
        y, k = int(lp.argmax()), int(dlp.argmax())
        seen.append(t)
        score += lp[y] + dlp[k]
        d = durations[k]
        if y == 0:
            d = max(d, 1)
        else:
            labels.append(y)
            run = run + 1 if d == 0 else 0
            if run > max_symbols:
                d, run = 1, 0
        t += d
    return labels, score, seen


@pytest.mark.parametrize("durations", [[0, 1, 2, 3, 4], [0, 1], [0, 1, 4]])
@pytest.mark.parametrize("max_symbols", [1, 3])
def test_greedy_search_batched_equals_one_utterance_at_a_time(durations, max_symbols):
    batch, num_frames = 4, 9
    tokens, durs = tables(batch, num_frames, len(durations), seed=len(durations))
    lengths = np.array([9, 4, 1, 7])
    steps = TdtTableSteps(tokens, durs)
    hyps, scores, evaluations = tdt_greedy_search(
        frames(batch, num_frames), lengths, steps, durations, max_symbols
    )
    for b in range(batch):
        labels, score, seen = greedy_by_hand(tokens[b], durs[b], durations, lengths[b],
                                             max_symbols)  # fmt: skip
        assert hyps[b] == labels
        assert scores[b] == pytest.approx(score, rel=1e-5)
        assert evaluations[b] == len(seen)
        assert [t for bb, t in steps.evaluated if bb == b] == seen


def test_greedy_search_skips_the_frames_durations_jump_over():
    num_frames = 10
    tokens = np.zeros((1, num_frames, N, V, V))
    durs = np.zeros((1, num_frames, N, V, 4))
    tokens[..., 0] = 5.0  # blank everywhere...
    durs[..., 3] = 5.0  # ...of duration 3
    tokens[0, 3, 0, 0, 2] = 10.0  # but label 2 on frame 3, duration 0,
    durs[0, 3, 0, 0] = [5.0, 0, 0, 0]
    tokens[0, 3, 1, 2, 1] = 10.0  # then label 1, duration 0 again (refused:
    durs[0, 3, 1, 2] = [5.0, 0, 0, 0]  # one symbol a frame), moving on one
    steps = TdtTableSteps(tokens, durs)
    hyps, _, evaluations = tdt_greedy_search(frames(1, num_frames), [num_frames],
                                             steps, [0, 1, 2, 3], 1)  # fmt: skip
    assert hyps == [[2, 1]]
    assert [t for _, t in steps.evaluated] == [0, 3, 3, 4, 7]
    assert evaluations.tolist() == [5]


def decoding_paths(tokens, durs, durations, num_frames, max_symbols):
    """{labels: log-sum of every decoding path emitting them}, one utterance.

    From (t, labels, run): a blank of duration d >= 1 to t + d; a label of
    duration d to t + d (d = 0 only while run < max_symbols); a path ends
    once t >= num_frames.
    """
    found = {}

    def walk(t, labels, run, score):
        if t >= num_frames:
            found[labels] = np.logaddexp(found.get(labels, -np.inf), score)
            return
        n, last = min(len(labels), N - 1), labels[-1] if labels else 0
        lp = log_softmax(np.float64(tokens[t, n, last]))
        dlp = log_softmax(np.float64(durs[t, n, last]))
        for k, d in enumerate(durations):
            if d >= 1:
                walk(t + d, labels, 0, score + lp[0] + dlp[k])
            for y in range(1, V):
                if d == 0 and run == max_symbols:
                    continue
                walk(t + d, labels + (y,), run + 1 if d == 0 else 0,
                     score + lp[y] + dlp[k])  # fmt: skip

    walk(0, (), 0, 0.0)
    return found


@pytest.mark.parametrize("durations", [[0, 1, 2], [0, 1, 3]])
def test_a_wide_beam_finds_the_most_probable_labels(durations):
    num_frames = 4
    tokens, durs = tables(1, num_frames, len(durations), seed=11)
    tokens, durs = tokens.astype(np.float32), durs.astype(np.float32)
    paths = decoding_paths(tokens[0], durs[0], durations, num_frames, 1)
    best = max(paths, key=paths.get)
    steps = TdtTableSteps(tokens, durs)
    encoder = frames(1, num_frames)[0]
    labels, score = tdt_beam_search(encoder, steps, durations, beam=500,
                                    max_symbols_per_frame=1)  # fmt: skip
    assert tuple(labels) == best
    assert score == pytest.approx(paths[best], abs=1e-4)


def test_a_narrow_beam_is_at_least_as_good_as_greedy_here():
    durations = [0, 1, 2]
    tokens, durs = tables(1, 4, 3, seed=5)
    steps = TdtTableSteps(tokens, durs)
    encoder = frames(1, 4)
    greedy, _, _ = tdt_greedy_search(encoder, [4], steps, durations, 1)
    paths = decoding_paths(tokens[0], durs[0], durations, 4, 1)
    labels, _ = tdt_beam_search(encoder[0], steps, durations, beam=4,
                                max_symbols_per_frame=1)  # fmt: skip
    assert paths[tuple(labels)] >= paths[tuple(greedy[0])] - 1e-6


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda s, e: tdt_greedy_search(e, [3], s, [0, 2]), "durations"),
        (lambda s, e: tdt_greedy_search(e, [3], s, [0, 1], 0), "max_symbols_per_frame"),
        (lambda s, e: tdt_beam_search(e[0], s, [0, 1], beam=0), "beam"),
    ],
)
def test_bad_arguments_are_named(call, message):
    steps = TdtTableSteps(*tables(1, 3, 2, seed=0))
    with pytest.raises(ValueError, match=message):
        call(steps, frames(1, 3))
