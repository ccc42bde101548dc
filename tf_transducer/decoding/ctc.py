# SPDX-License-Identifier: Apache-2.0
"""CTC decoding: greedy and prefix beam search, optionally with an n-gram LM.

Inputs are logits or log-probabilities [B, T, C] (numpy or tensors) with
frame lengths [B]; blank is class 0 unless given. Outputs are lists of label
ids (no blanks, repeats merged).
"""

import functools
import math
from typing import Any

import numpy as np

from tf_transducer._checks import TensorLike
from tf_transducer.decoding._numeric import entropy_confidence
from tf_transducer.decoding._numeric import log_add
from tf_transducer.decoding._numeric import log_softmax
from tf_transducer.decoding.lm import LmContext
from tf_transducer.decoding.lm import WordScorer


def _lengths(logits: TensorLike, lengths: TensorLike | None) -> list[int]:
    B, T = np.shape(logits)[:2]
    if lengths is None:
        return [T] * B
    return [int(n) for n in np.asarray(lengths).reshape(-1)]


def ctc_greedy_decode(
    logits: TensorLike, lengths: TensorLike | None = None, blank: int = 0
) -> list[list[int]]:
    """Best path per utterance: argmax per frame, repeats merged, blanks removed.

    Args:
      logits: float [B, T, C].
      lengths: optional int [B] frames.
      blank: the blank class.

    Returns:
      B lists of label ids.
    """
    best = np.argmax(np.asarray(logits), axis=-1)  # [B, T]
    out = []
    for b, n in enumerate(_lengths(logits, lengths)):
        labels: list[int] = []
        previous = None
        for k in best[b, :n]:
            k = int(k)
            if k != previous and k != blank:
                labels.append(k)
            previous = k
        out.append(labels)
    return out


class CtcGreedyState:
    """Where a streamed CTC best path stands between chunks of frames.

    hyps [B] label lists; frames: each label's frame (the first of its
    run) from the stream's start; confidence: each label's entropy
    confidence at that frame; previous [B]: the last frame's best class
    (a label run may continue into the next chunk); offset [B]: frames
    seen.
    """

    def __init__(self, batch: int) -> None:
        self.hyps: list[list[int]] = [[] for _ in range(batch)]
        self.frames: list[list[int]] = [[] for _ in range(batch)]
        self.confidence: list[list[float]] = [[] for _ in range(batch)]
        self.previous = np.full([batch], -1)
        self.offset = np.zeros([batch], np.int64)


def ctc_greedy_continue(
    logits: TensorLike, lengths: TensorLike, state: CtcGreedyState, blank: int = 0
) -> CtcGreedyState:
    """The best path over more frames (a chunk of a stream), `state` updated.

    Fed chunk by chunk it gives `ctc_greedy_decode` of the whole stream.

    Args:
      logits: float [B, T, C] of this chunk.
      lengths: int [B] valid frames of this chunk.
      state: the `CtcGreedyState` so far (updated in place, and returned).
      blank: the blank class.
    """
    logits = np.asarray(logits, np.float32)
    best = np.argmax(logits, axis=-1)
    for b, n in enumerate(_lengths(logits, lengths)):
        for t in range(n):
            k = int(best[b, t])
            if k != state.previous[b] and k != blank:
                state.hyps[b].append(k)
                state.frames[b].append(int(state.offset[b]) + t)
                sure = entropy_confidence(log_softmax(logits[b, t]))
                state.confidence[b].append(float(sure))
            state.previous[b] = k
        state.offset[b] += n
    return state


def check_beam_width(beam_width: Any) -> None:
    """ValueError naming beam_width unless it is an int >= 1 (not a bool)."""
    is_int = isinstance(beam_width, int) and not isinstance(beam_width, bool)
    if not is_int or beam_width < 1:
        raise ValueError(f"beam_width must be an int >= 1, got {beam_width!r}")


class _Beam:
    """One search state of the CTC prefix beam search.

    The state is a prefix and whether its alignments end in a blank; a _Beam
    holds their total log-probability and the prefix's language-model state.
    """

    __slots__ = ("score", "lm")

    def __init__(self, lm: LmContext) -> None:
        self.score = -math.inf
        self.lm = lm

    def child(self) -> "_Beam":
        return _Beam(self.lm.copy())


def ctc_beam_search(
    logits: TensorLike, lengths: TensorLike | None = None, beam_width: int = 16,
    blank: int = 0, scorer: WordScorer | None = None, alpha: float = 0.75,
    beta: float = 1.85, cutoff_top_n: int = 40,
) -> list[list[int]]:  # fmt: skip
    """CTC prefix beam search, batched over utterances, with optional LM fusion.

    The search states are (prefix, whether the alignment ends in a blank),
    each with the summed probability of its alignments. Per frame every state
    moves by a blank, by a repeat of its last label (merged into the same
    prefix unless a blank came between) or by a new label among the
    `cutoff_top_n` most likely; states that meet are summed, and the
    `beam_width` best by

        log P_ctc(state) + alpha * log P_lm(words) + beta * words

    survive. At the end the two states of each prefix are summed. With
    beam_width 1 only one alignment survives each frame: the search is then
    exactly greedy decoding. With a scorer a word is scored when it is
    completed (by its space, or at the end, with the sentence end).

    Args:
      logits: float [B, T, C] logits (log-softmax is applied).
      lengths: optional int [B] frames.
      beam_width: states kept.
      blank: the blank class.
      scorer: optional `WordScorer` (see tf_transducer.decoding.lm).
      alpha: the LM weight (DeepSpeech's name).
      beta: the word insertion bonus (DeepSpeech's name).
      cutoff_top_n: labels tried per frame.

    Returns:
      B lists of label ids, the best prefix of each utterance.
    """
    check_beam_width(beam_width)
    log_probs = log_softmax(logits)
    return [
        _search(log_probs[b, :n], beam_width, blank, scorer, alpha, beta, cutoff_top_n)
        for b, n in enumerate(_lengths(logits, lengths))
    ]


def _move(moves, scorer, key, score, parent, new_label=None):
    """Adds an alignment of log-probability score to the state key."""
    beam = moves.get(key)
    if beam is None:
        beam = parent.child()
        if new_label is not None and scorer is not None:
            scorer.extend(beam.lm, key[0][:-1], new_label)
        moves[key] = beam
    beam.score = log_add(beam.score, score)


def _search(log_probs, beam_width, blank, scorer, alpha, beta, cutoff_top_n):
    def rank(beam):
        if scorer is None:
            return beam.score
        return beam.score + alpha * beam.lm.score + beta * beam.lm.words

    start = _Beam(scorer.start() if scorer else LmContext())
    start.score = 0.0
    beams = {((), True): start}
    top_n = min(cutoff_top_n, log_probs.shape[-1])
    for frame in log_probs:
        labels = [int(k) for k in np.argpartition(-frame, top_n - 1)[:top_n]]
        moves = {}
        move = functools.partial(_move, moves, scorer)
        for (prefix, after_blank), beam in beams.items():
            move((prefix, True), beam.score + frame[blank], beam)
            for k in labels:
                if k == blank:
                    continue
                if prefix and k == prefix[-1] and not after_blank:
                    move((prefix, False), beam.score + frame[k], beam)
                else:
                    move((prefix + (k,), False), beam.score + frame[k], beam, k)
        kept = sorted(moves.items(), key=lambda item: rank(item[1]), reverse=True)
        beams = dict(kept[:beam_width])
    finals = {}
    for (prefix, _), beam in beams.items():
        if prefix in finals:
            finals[prefix].score = log_add(finals[prefix].score, beam.score)
        else:
            final = beam.child()
            final.score = beam.score
            if scorer is not None:
                scorer.finish(final.lm, prefix)
            finals[prefix] = final
    return list(max(finals.items(), key=lambda item: rank(item[1]))[0])
