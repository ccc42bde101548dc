# SPDX-License-Identifier: Apache-2.0
"""Transducer decoding: greedy search and beam searches, batched over utterances.

The searches run on three step functions (`TransducerSteps`), so the same
code decodes a Keras `Transducer` (`KerasSteps`) and its TFLite export:

    start(batch)            -> (decoder projection [B, J], state) after the blank
    predict(labels, state)  -> (decoder projection [B, J], state)
    joint(encoder, decoder) -> logits [B, V]      (projected inputs [B, J])

States are lists of numpy arrays with the batch first. Scores are natural
log-probabilities of the model (each alignment: the product of its steps).
"""

from typing import TYPE_CHECKING
from typing import Protocol

import numpy as np

from tf_transducer._checks import TensorLike
from tf_transducer.decoding._hypotheses import Hyp
from tf_transducer.decoding._hypotheses import State
from tf_transducer.decoding._hypotheses import finish
from tf_transducer.decoding._hypotheses import grow
from tf_transducer.decoding._hypotheses import rank
from tf_transducer.decoding._hypotheses import select_rows
from tf_transducer.decoding._hypotheses import start_hyp
from tf_transducer.decoding._numeric import entropy_confidence
from tf_transducer.decoding._numeric import log_add
from tf_transducer.decoding._numeric import log_softmax
from tf_transducer.decoding.hotwords import HotwordGraph
from tf_transducer.decoding.keras_steps import KerasSteps
from tf_transducer.decoding.keras_steps import encode_projected
from tf_transducer.decoding.lm import WordScorer
from tf_transducer.decoding.tdt import tdt_beam_search
from tf_transducer.decoding.tdt import tdt_greedy_search
from tf_transducer.decoding.token_lm import TokenLm
from tf_transducer.decoding.token_lm import check_token_lm

if TYPE_CHECKING:
    from tf_transducer.models import Transducer


class TransducerSteps(Protocol):
    """The three step functions the searches run on (see the module docstring)."""

    def start(self, batch: int) -> tuple[np.ndarray, State]: ...

    def predict(self, labels: np.ndarray, state: State) -> tuple[np.ndarray, State]: ...

    def joint(self, encoder: np.ndarray, decoder: np.ndarray) -> np.ndarray: ...


class GreedyState:
    """Where a batched greedy search stands: hypotheses, scores, decoder state.

    Per utterance also each label's encoder frame (`frames`, counted from the
    first frame of the first chunk) and entropy confidence (`confidence`);
    `offset`: frames decoded so far; `context`: the hotword automaton's state.
    """

    def __init__(self, steps: TransducerSteps, batch: int) -> None:
        self.decoder, self.state = steps.start(batch)
        self.hyps: list[list[int]] = [[] for _ in range(batch)]
        self.scores = np.zeros(batch)
        self.frames: list[list[int]] = [[] for _ in range(batch)]
        self.confidence: list[list[float]] = [[] for _ in range(batch)]
        self.offset = 0
        self.context = np.zeros(batch, np.int64)


def greedy_continue(
    encoder: TensorLike, lengths: TensorLike, steps: TransducerSteps,
    search: GreedyState, max_symbols_per_frame: int = 3, blank: int = 0,
    hotwords: HotwordGraph | None = None,
) -> GreedyState:  # fmt: skip
    """Runs greedy search over more frames, updating `search` in place.

    Streaming decoding calls this per chunk.

    Args:
      encoder: float [B, n, J] projected encoder frames.
      lengths: int [B] valid frames of them.
      steps: the step functions.
      search: where the search stands, updated.
      max_symbols_per_frame: emitted symbols per frame before moving on.
      blank: the blank class.
      hotwords: a `HotwordGraph` whose boosts are added to the labels'
        log-probabilities before each choice (and to the scores).

    Returns:
      search.
    """
    encoder = np.asarray(encoder, np.float32)
    lengths = np.asarray(lengths).reshape(-1)
    batch = encoder.shape[0]
    for t in range(encoder.shape[1]):
        active = t < lengths
        for _ in range(max_symbols_per_frame):
            log_probs = log_softmax(steps.joint(encoder[:, t], search.decoder))
            boosted = log_probs
            if hotwords is not None:
                boosted = log_probs + hotwords.delta[search.context]
            best = boosted.argmax(axis=-1)
            emit = active & (best != blank)
            search.scores += np.where(active, boosted[np.arange(batch), best], 0.0)
            if not emit.any():
                break
            sure = entropy_confidence(log_probs)
            for b in np.flatnonzero(emit):
                search.hyps[b].append(int(best[b]))
                search.frames[b].append(search.offset + t)
                search.confidence[b].append(float(sure[b]))
            if hotwords is not None:
                moved = hotwords.goto[search.context, best]
                search.context = np.where(emit, moved, search.context)
            decoder, state = steps.predict(np.where(emit, best, blank), search.state)
            search.decoder = np.where(emit[:, None], decoder, search.decoder)
            search.state = select_rows(emit, state, search.state)
            active = emit  # only those that emitted look at the frame again
    search.offset += encoder.shape[1]
    return search


def greedy_search(
    encoder: TensorLike,
    lengths: TensorLike,
    steps: TransducerSteps,
    max_symbols_per_frame: int = 3,
    blank: int = 0,
) -> tuple[list[list[int]], np.ndarray]:
    """Best symbol per step, up to max_symbols_per_frame symbols per frame.

    Args:
      encoder: float [B, T, J] projected encoder frames.
      lengths: int [B] frames.
      steps: the step functions.
      max_symbols_per_frame: emitted symbols per frame before moving on.
      blank: the blank class.

    Returns:
      (B label lists, B path log-probabilities).
    """
    search = GreedyState(steps, np.shape(encoder)[0])
    greedy_continue(encoder, lengths, steps, search, max_symbols_per_frame, blank)
    return search.hyps, search.scores


def modified_beam_search(
    encoder: TensorLike, steps: TransducerSteps, beam: int = 4, blank: int = 0,
    scorer: WordScorer | None = None, alpha: float = 0.5, beta: float = 1.0,
    token_lm: TokenLm | None = None, lm_scale: float = 0.3,
) -> tuple[list[int], float]:  # fmt: skip
    """Beam search with at most one symbol per frame (k2 / icefall's "modified").

    Per frame every hypothesis either stays (blank) or grows by one of its
    `beam` best symbols; identical label sequences are merged (log-add); the
    `beam` best survive.

    Args:
      encoder: float [T, J] projected frames of one utterance.
      steps: the step functions.
      beam: hypotheses kept.
      blank: the blank class.
      scorer: optional `WordScorer` for shallow fusion with a word LM.
      alpha: the LM weight.
      beta: the word insertion bonus.
      token_lm: optional `TokenLm`, a token n-gram fused into the scores:
        each growth gains lm_scale * ln P(label | context), each final
        hypothesis lm_scale * ln P(</s> | context).
      lm_scale: the token n-gram's weight.

    Returns:
      (labels, log-probability of the hypothesis; with token_lm, the fused
      score).
    """
    if token_lm is not None:
        check_token_lm(token_lm)
    hyps = [start_hyp(steps, scorer)]
    if token_lm is not None:
        hyps[0].token_state = token_lm.start
    for frame in np.asarray(encoder, np.float32):
        decoders = np.concatenate([h.decoder for h in hyps])
        log_probs = log_softmax(
            steps.joint(np.repeat(frame[None], len(hyps), 0), decoders)
        )
        merged: dict[tuple[int, ...], Hyp] = {}
        pending: list[tuple[float, Hyp, int]] = []
        for hyp, lp in zip(hyps, log_probs, strict=True):
            stay = merged.get(hyp.prefix)
            if stay is None:
                merged[hyp.prefix] = hyp.stay(hyp.score + lp[blank])
            else:
                stay.score = log_add(stay.score, hyp.score + lp[blank])
            if token_lm is not None:  # (its blank column is 0)
                lp = lp + lm_scale * token_lm.logp[hyp.token_state]
            order = np.argsort(-lp)
            for k in [int(k) for k in order[: beam + 1] if k != blank][:beam]:
                pending.append((hyp.score + lp[k], hyp, k))
        # Only the best growths can survive: predict for those alone.
        pending.sort(key=lambda item: -item[0])
        pending = pending[:beam]
        if pending:
            children = grow(
                [p[1] for p in pending], [p[2] for p in pending], steps, scorer
            )
            for (score, _, label), child in zip(pending, children, strict=True):
                child.score = score
                if token_lm is not None:
                    child.token_state = int(token_lm.goto[child.token_state, label])
                same = merged.get(child.prefix)
                if same is None:
                    merged[child.prefix] = child
                else:
                    same.score = log_add(same.score, score)
        hyps = sorted(merged.values(), key=lambda h: -rank(h, scorer, alpha, beta))[
            :beam
        ]
    if token_lm is not None:
        for hyp in hyps:
            hyp.score += lm_scale * float(token_lm.final[hyp.token_state])
    return finish(hyps, scorer, alpha, beta)


def beam_search(
    encoder: TensorLike, steps: TransducerSteps, beam: int = 4, blank: int = 0,
    scorer: WordScorer | None = None, alpha: float = 0.5, beta: float = 1.0,
    max_expansions: int | None = None,
) -> tuple[list[int], float]:  # fmt: skip
    """The standard transducer beam search (Graves 2012, as ESPnet runs it).

    Per frame, the best unfinished hypothesis is expanded: by a blank it is
    finished for this frame, by each of its `beam` best symbols it becomes a
    new unfinished one; this repeats until `beam` finished hypotheses beat
    every unfinished one (or `max_expansions`, default 2 * beam, expansions).

    Args:
      encoder: float [T, J] projected frames of one utterance.
      steps: the step functions.
      beam: hypotheses kept, and symbols tried per expansion.
      blank: the blank class.
      scorer: optional `WordScorer` for shallow fusion with a word LM.
      alpha: the LM weight.
      beta: the word insertion bonus.
      max_expansions: expansions per frame at most (None: 2 * beam).

    Returns:
      (labels, log-probability of the hypothesis).
    """
    max_expansions = max_expansions or 2 * beam
    finished = [start_hyp(steps, scorer)]
    for frame in np.asarray(encoder, np.float32):
        unfinished, finished = finished, []
        for _ in range(max_expansions):
            if not unfinished:
                break
            best = max(unfinished, key=lambda h: rank(h, scorer, alpha, beta))
            unfinished.remove(best)
            lp = log_softmax(steps.joint(frame[None], best.decoder))[0]
            same = next((h for h in finished if h.prefix == best.prefix), None)
            if same is None:
                finished.append(best.stay(best.score + lp[blank]))
            else:
                same.score = log_add(same.score, best.score + lp[blank])
            labels = [int(k) for k in np.argsort(-lp)[: beam + 1] if k != blank][:beam]
            children = grow([best] * len(labels), labels, steps, scorer)
            for child, k in zip(children, labels, strict=True):
                child.score = best.score + lp[k]
                unfinished.append(child)
            finished.sort(key=lambda h: -rank(h, scorer, alpha, beta))
            top = [rank(h, scorer, alpha, beta) for h in finished[:beam]]
            if (
                len(top) >= beam
                and unfinished
                and min(top) >= max(rank(h, scorer, alpha, beta) for h in unfinished)
            ):
                break
        finished = finished[:beam] or [best]
    return finish(finished, scorer, alpha, beta)


def transducer_greedy_decode(
    model: "Transducer",
    inputs: tuple[TensorLike, TensorLike],
    max_symbols_per_frame: int = 3,
) -> list[list[int]]:
    """B label lists: greedy search of a Keras `Transducer` on (features, lengths).

    A Token-and-Duration Transducer (a joiner with durations) is decoded by
    `tdt_greedy_search`, which skips the frames its durations jump over.
    """
    projected, lengths = encode_projected(model, inputs)
    durations = getattr(model.joiner, "durations", None)
    if durations is not None:
        hyps, _, _ = tdt_greedy_search(projected, lengths, KerasSteps(model),
                                       durations, max_symbols_per_frame)  # fmt: skip
        return hyps
    steps = KerasSteps(model)
    hyps, _ = greedy_search(projected, lengths, steps, max_symbols_per_frame)
    return hyps


def transducer_beam_search(
    model: "Transducer", inputs: tuple[TensorLike, TensorLike], beam: int = 4,
    method: str = "modified", scorer: WordScorer | None = None, alpha: float = 0.5,
    beta: float = 1.0, token_lm: TokenLm | None = None, lm_scale: float = 0.3,
) -> list[list[int]]:  # fmt: skip
    """B label lists: beam search ("modified" or "standard") of a Keras `Transducer`.

    A Token-and-Duration Transducer is decoded by `tdt_beam_search`
    (hypotheses advance by their durations) whichever the method. A token
    n-gram (`token_lm`, weight `lm_scale`) is fused by the modified search
    of an RNN-T.
    """
    if method not in ("modified", "standard"):
        raise ValueError(f'method must be "modified" or "standard", got {method!r}')
    durations = getattr(model.joiner, "durations", None)
    if token_lm is not None:
        check_token_lm(token_lm, model.joiner.vocab_size)
        if method != "modified" or durations is not None:
            raise ValueError(
                "token_lm is fused by the modified beam search of an RNN-T, got "
                f"method={method!r}"
                + (" and a TDT joiner" if durations is not None else "")
            )
    if not isinstance(beam, int) or beam < 1:
        raise ValueError(f"beam must be an int >= 1, got {beam!r}")
    search = modified_beam_search if method == "modified" else beam_search
    projected, lengths = encode_projected(model, inputs)
    steps = KerasSteps(model)
    if durations is not None:
        return [
            tdt_beam_search(projected[b, : int(n)], steps, durations, beam,
                            scorer=scorer, alpha=alpha, beta=beta)[0]
            for b, n in enumerate(lengths)
        ]  # fmt: skip
    if token_lm is not None:
        return [
            modified_beam_search(projected[b, : int(n)], steps, beam, scorer=scorer,
                                 alpha=alpha, beta=beta, token_lm=token_lm,
                                 lm_scale=lm_scale)[0]
            for b, n in enumerate(lengths)
        ]  # fmt: skip
    return [
        search(
            projected[b, : int(n)], steps, beam, scorer=scorer, alpha=alpha, beta=beta
        )[0]
        for b, n in enumerate(lengths)
    ]
