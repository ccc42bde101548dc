# SPDX-License-Identifier: Apache-2.0
"""Decoding a Token-and-Duration Transducer: searches that skip frames.

The joint gives token logits and duration logits (`TdtSteps.joint_heads`);
a hypothesis on frame t that takes duration d moves on to frame t + d, so
the joint is evaluated only on the frames a search lands on. A blank moves
at least one frame; at most `max_symbols_per_frame` labels of duration 0
follow each other on one frame (then the next label moves one frame on),
as NeMo's TDT decoding does.
"""

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from tf_transducer._checks import TensorLike
from tf_transducer.decoding._hypotheses import Hyp
from tf_transducer.decoding._hypotheses import State
from tf_transducer.decoding._hypotheses import finish
from tf_transducer.decoding._hypotheses import grow
from tf_transducer.decoding._hypotheses import rank
from tf_transducer.decoding._hypotheses import start_hyp
from tf_transducer.decoding._numeric import entropy_confidence
from tf_transducer.decoding._numeric import log_add
from tf_transducer.decoding._numeric import log_softmax
from tf_transducer.decoding.hotwords import HotwordGraph
from tf_transducer.decoding.lm import WordScorer


class TdtSteps(Protocol):
    """The step functions of `TransducerSteps`, the joint with both heads."""

    def start(self, batch: int) -> tuple[np.ndarray, State]: ...

    def predict(self, labels: np.ndarray, state: State) -> tuple[np.ndarray, State]: ...

    def joint_heads(
        self, encoder: np.ndarray, decoder: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]: ...


def _check_search(durations, max_symbols_per_frame):
    durations = np.asarray(durations, np.int64)
    if durations.ndim != 1 or durations.size < 2 or durations[1] != 1:
        raise ValueError(f"durations must be the head's [0, 1, ...], got {durations}")
    if not isinstance(max_symbols_per_frame, int) or max_symbols_per_frame < 1:
        raise ValueError(
            f"max_symbols_per_frame must be an int >= 1, got {max_symbols_per_frame!r}"
        )
    return durations


class TdtGreedyState:
    """Where a batched TDT greedy search stands, between chunks of frames.

    hyps, scores and the decoder as `GreedyState`'s; `skip` [B]: frames of
    the next chunk that a duration already jumped over; `run` [B]: labels of
    duration 0 emitted on the current frame; `evaluations` [B]: joint
    evaluations so far; `frames`, `confidence`, `offset` and `context` as
    `GreedyState`'s.
    """

    def __init__(self, steps: TdtSteps, batch: int) -> None:
        decoder, state = steps.start(batch)
        self.decoder = np.array(decoder)  # written in, row by row
        self.state = [np.array(s) for s in state]
        self.hyps: list[list[int]] = [[] for _ in range(batch)]
        self.scores = np.zeros(batch)
        self.skip = np.zeros(batch, np.int64)
        self.run = np.zeros(batch, np.int64)
        self.evaluations = np.zeros(batch, np.int64)
        self.frames: list[list[int]] = [[] for _ in range(batch)]
        self.confidence: list[list[float]] = [[] for _ in range(batch)]
        self.offset = 0
        self.context = np.zeros(batch, np.int64)


def tdt_greedy_continue(
    encoder: TensorLike, lengths: TensorLike, steps: TdtSteps, search: TdtGreedyState,
    durations: Sequence[int], max_symbols_per_frame: int = 3, blank: int = 0,
    hotwords: HotwordGraph | None = None,
) -> TdtGreedyState:  # fmt: skip
    """Runs TDT greedy search over more frames, updating `search` in place.

    Streaming decoding calls this per chunk: a duration that jumps past the
    chunk's end carries into the next one (`search.skip`), so a stream
    decodes as the whole utterance does.

    Args:
      encoder: float [B, n, J] projected encoder frames.
      lengths: int [B] valid frames of them.
      steps: the step functions (`TdtSteps`).
      search: where the search stands, updated.
      durations: the duration head's K frame counts.
      max_symbols_per_frame: labels of duration 0 in a row on one frame.
      blank: the blank class.
      hotwords: a `HotwordGraph` whose boosts are added to the labels'
        log-probabilities before each choice (and to the scores).

    Returns:
      search.
    """
    durations = _check_search(durations, max_symbols_per_frame)
    encoder = np.asarray(encoder, np.float32)
    lengths = np.asarray(lengths).reshape(-1)
    t, run = search.skip.copy(), search.run
    while True:
        rows = np.flatnonzero(t < lengths)  # the joint runs on these alone
        if rows.size == 0:
            break
        tokens, durs = steps.joint_heads(encoder[rows, t[rows]], search.decoder[rows])
        tokens, durs = log_softmax(tokens), log_softmax(durs)
        boosted = tokens
        if hotwords is not None:
            boosted = tokens + hotwords.delta[search.context[rows]]
        best, k = boosted.argmax(axis=-1), durs.argmax(axis=-1)
        picked = np.arange(rows.size)
        search.scores[rows] += boosted[picked, best] + durs[picked, k]
        search.evaluations[rows] += 1
        emit = best != blank
        step = np.where(emit, durations[k], np.maximum(durations[k], 1))
        run[rows] = np.where(emit & (step == 0), run[rows] + 1, 0)
        step = np.where(run[rows] > max_symbols_per_frame, 1, step)
        run[rows] = np.where(step > 0, 0, run[rows])
        at = t.copy()  # the frames the labels are emitted on
        t[rows] += step
        sure = entropy_confidence(tokens)
        emitted = rows[emit]
        if emitted.size:
            for b, y, c in zip(emitted, best[emit], sure[emit], strict=True):
                search.hyps[b].append(int(y))
                search.frames[b].append(search.offset + int(at[b]))
                search.confidence[b].append(float(c))
            if hotwords is not None:
                moved = hotwords.goto[search.context[emitted], best[emit]]
                search.context[emitted] = moved
            new_decoder, new_state = steps.predict(
                best[emit].astype(np.int32), [s[emitted] for s in search.state]
            )
            search.decoder[emitted] = new_decoder
            for s, new in zip(search.state, new_state, strict=True):
                s[emitted] = new
    search.skip = np.maximum(t - encoder.shape[1], 0)
    search.offset += encoder.shape[1]
    return search


def tdt_greedy_search(
    encoder: TensorLike, lengths: TensorLike, steps: TdtSteps, durations: Sequence[int],
    max_symbols_per_frame: int = 3, blank: int = 0,
) -> tuple[list[list[int]], np.ndarray, np.ndarray]:  # fmt: skip
    """The best token and the best duration per step, batched over utterances.

    Each utterance keeps its own frame: per step the joint is evaluated
    once for each utterance not yet done, on the frame it has reached, and
    the prediction network only for those that emitted.

    Args:
      encoder: float [B, T, J] projected encoder frames.
      lengths: int [B] frames.
      steps: the step functions (`TdtSteps`).
      durations: the duration head's K frame counts.
      max_symbols_per_frame: labels of duration 0 in a row on one frame.
      blank: the blank class.

    Returns:
      (B label lists, B path log-probabilities (tokens and durations),
      joint evaluations [B] per utterance).
    """
    search = TdtGreedyState(steps, np.shape(encoder)[0])
    tdt_greedy_continue(encoder, lengths, steps, search, durations,
                        max_symbols_per_frame, blank)  # fmt: skip
    return search.hyps, search.scores, search.evaluations


def tdt_beam_search(
    encoder: TensorLike, steps: TdtSteps, durations: Sequence[int], beam: int = 4,
    blank: int = 0, max_symbols_per_frame: int = 3, scorer: WordScorer | None = None,
    alpha: float = 0.5, beta: float = 1.0,
) -> tuple[list[int], float]:  # fmt: skip
    """Beam search whose hypotheses advance by their durations (one utterance).

    Hypotheses wait in the frame they have reached. Frame by frame, those
    waiting are expanded: by a blank of each duration d >= 1 to frame
    t + d, by each of their `beam` best labels with each duration to
    t + d (d = 0: expanded again on the same frame, up to
    `max_symbols_per_frame` times). Per frame the `beam` best label
    expansions are kept, hypotheses with one label sequence on one frame
    are merged (log-add), and at most `beam` wait in a frame. Those that
    pass the last frame are finished (at most `beam` of them kept, as in
    a frame, so that `tdt_beam_graph` holds them in fixed-shape tensors).

    Args:
      encoder: float [T, J] projected frames of one utterance.
      steps: the step functions (`TdtSteps`).
      durations: the duration head's K frame counts.
      beam: hypotheses kept per frame, and labels tried per hypothesis.
      blank: the blank class.
      max_symbols_per_frame: labels of duration 0 in a row on one frame.
      scorer: optional `WordScorer` for shallow fusion with a word LM.
      alpha: the LM weight.
      beta: the word insertion bonus.

    Returns:
      (labels, log-probability of the hypothesis).
    """
    durations = _check_search(durations, max_symbols_per_frame)
    if not isinstance(beam, int) or beam < 1:
        raise ValueError(f"beam must be an int >= 1, got {beam!r}")
    encoder = np.asarray(encoder, np.float32)
    frames = encoder.shape[0]
    if frames == 0:
        return [], 0.0
    # Keyed by frame; those past the last frame are finished (key `frames`).
    waiting: dict[int, dict[tuple[int, ...], Hyp]] = {0: {(): start_hyp(steps, scorer)}}

    def place(hyp: Hyp, frame: int) -> None:
        group = waiting.setdefault(min(frame, frames), {})
        same = group.get(hyp.prefix)
        if same is None:
            group[hyp.prefix] = hyp
        else:
            same.score = log_add(same.score, hyp.score)

    for t in range(frames):
        hyps = list(waiting.pop(t, {}).values())
        for repeat in range(max_symbols_per_frame + 1):
            if not hyps:
                break
            hyps = sorted(hyps, key=lambda h: -rank(h, scorer, alpha, beta))[:beam]
            tokens, durs = steps.joint_heads(
                np.repeat(encoder[t][None], len(hyps), 0),
                np.concatenate([h.decoder for h in hyps]),
            )
            tokens, durs = log_softmax(tokens), log_softmax(durs)
            pending = []
            for hyp, lp, dlp in zip(hyps, tokens, durs, strict=True):
                for k, d in enumerate(durations):
                    if d >= 1:
                        place(hyp.stay(hyp.score + lp[blank] + dlp[k]), t + int(d))
                labels = [int(y) for y in np.argsort(-lp)[: beam + 1] if y != blank]
                for y in labels[:beam]:
                    for k, d in enumerate(durations):
                        if d == 0 and repeat == max_symbols_per_frame:
                            continue  # no more labels on this frame
                        pending.append((hyp.score + lp[y] + dlp[k], hyp, y, int(d)))
            pending.sort(key=lambda item: -item[0])
            pending = pending[:beam]
            hyps = []
            if pending:
                children = grow([p[1] for p in pending], [p[2] for p in pending],
                                 steps, scorer)  # fmt: skip
                same_frame: dict[tuple[int, ...], Hyp] = {}
                for (score, _, _, d), child in zip(pending, children, strict=True):
                    child.score = score
                    if d == 0:
                        same = same_frame.get(child.prefix)
                        if same is None:
                            same_frame[child.prefix] = child
                        else:
                            same.score = log_add(same.score, score)
                    else:
                        place(child, t + d)
                hyps = list(same_frame.values())
        for frame, group in list(waiting.items()):  # at most `beam` per frame
            best = sorted(group.values(), key=lambda h: -rank(h, scorer, alpha, beta))
            waiting[frame] = {h.prefix: h for h in best[:beam]}
    # (Not empty: the last frame's hypotheses all pass it by their blanks.)
    return finish(list(waiting[frames].values()), scorer, alpha, beta)
