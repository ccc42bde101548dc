# SPDX-License-Identifier: Apache-2.0
"""What the transducer searches share: hypotheses and decoder states.

Batch-row state selection for the batched searches, and the hypotheses of
the beam searches (label prefix, score, decoder output and state, LM
context) with their growth by a batch of labels.
"""

from typing import Protocol
from typing import TypeAlias

import numpy as np

from tf_transducer.decoding.lm import LmContext
from tf_transducer.decoding.lm import WordScorer

State: TypeAlias = list[np.ndarray]


class PredictorSteps(Protocol):
    """The prediction network's step functions, which every search calls."""

    def start(self, batch: int) -> tuple[np.ndarray, State]: ...

    def predict(self, labels: np.ndarray, state: State) -> tuple[np.ndarray, State]: ...


def select_rows(mask: np.ndarray, new: State, old: State) -> State:
    """Per batch row: new where mask, else old (states are lists of arrays)."""
    out = []
    for n, o in zip(new, old, strict=True):
        m = np.reshape(mask, [-1] + [1] * (np.ndim(n) - 1))
        out.append(np.where(m, n, o))
    return out


class Hyp:
    __slots__ = ("prefix", "score", "decoder", "state", "lm", "token_state")

    def __init__(
        self, prefix: tuple[int, ...], score: float, decoder: np.ndarray, state: State,
        lm: LmContext, token_state: int = 0,
    ) -> None:  # fmt: skip
        self.prefix, self.score = prefix, score
        self.decoder, self.state = decoder, state
        self.lm = lm  # LmContext of a word scorer
        self.token_state = token_state  # the state of a token n-gram (TokenLm)

    def stay(self, score: float) -> "Hyp":
        """The same hypothesis (no new label) with another score."""
        return Hyp(self.prefix, score, self.decoder, self.state, self.lm.copy(),
                   self.token_state)  # fmt: skip


def rank(hyp: Hyp, scorer: WordScorer | None, alpha: float, beta: float) -> float:
    if scorer is None:
        return hyp.score
    return hyp.score + alpha * hyp.lm.score + beta * hyp.lm.words


def grow(
    parents: list[Hyp],
    labels: list[int],
    steps: PredictorSteps,
    scorer: WordScorer | None,
) -> list[Hyp]:
    """Children hyps (scores to be set) of parents extended by labels, one batch."""
    state = [
        np.concatenate([p.state[i] for p in parents])
        for i in range(len(parents[0].state))
    ]
    decoder, state = steps.predict(np.asarray(labels, np.int32), state)
    children = []
    for j, (parent, label) in enumerate(zip(parents, labels, strict=True)):
        child = Hyp(
            parent.prefix + (label,),
            parent.score,
            decoder[j : j + 1],
            [s[j : j + 1] for s in state],
            parent.lm.copy(),
            parent.token_state,  # (the caller steps a token n-gram)
        )
        if scorer is not None:
            scorer.extend(child.lm, parent.prefix, label)
        children.append(child)
    return children


def start_hyp(steps: PredictorSteps, scorer: WordScorer | None) -> Hyp:
    decoder, state = steps.start(1)
    return Hyp((), 0.0, decoder, state, scorer.start() if scorer else LmContext())


def finish(
    hyps: list[Hyp], scorer: WordScorer | None, alpha: float, beta: float
) -> tuple[list[int], float]:
    if scorer is not None:
        for hyp in hyps:
            scorer.finish(hyp.lm, hyp.prefix)
    best = max(hyps, key=lambda h: rank(h, scorer, alpha, beta))
    return list(best.prefix), best.score
