# SPDX-License-Identifier: Apache-2.0
"""Hotwords (context biasing): phrases as an Aho-Corasick automaton in tensors.

The phrases' label sequences make a trie; failure links (the longest proper
suffix of a node's labels that is also a trie path) turn it into an
automaton that follows every phrase at once. It is held as two dense
tables, so a search in a graph (or a TFLite program) steps it by gathers:

  goto  [S, V] int32: the state after a label (the blank stays);
  delta [S, V] float32: the score change of that step;
  depth [S] float32: a state's partial-match boost, taken back at the end.

Each label that follows a phrase earns the phrase's per-label `score`
(partial matches are boosted as they grow). When the match breaks, the
boost earned so far is taken back (the step lands on the failure state,
whose own partial boost is kept). When a phrase is completed its whole
boost is locked in, so it survives the take-back; a phrase ending inside a
longer one (through the failure links) counts as well. The boosts are
icefall's and sherpa-onnx's context-graph scores; a node shared by phrases
of different scores takes the largest.
"""

from collections.abc import Sequence
from typing import Any
from typing import NamedTuple

import numpy as np


class HotwordGraph(NamedTuple):
    """The automaton's tables (see the module); state 0 is the start."""

    goto: np.ndarray
    delta: np.ndarray
    depth: np.ndarray


def hotword_graph(
    phrases: Sequence[Sequence[int]],
    vocab_size: int,
    scores: float | Sequence[float] = 1.5,
    blank: int = 0,
) -> HotwordGraph:
    """The automaton of phrases given as label sequences.

    Args:
      phrases: each phrase's labels (not empty; no blank).
      vocab_size: V, the joint's classes.
      scores: the boost per label, one for all or one per phrase (> 0).
      blank: the blank class (its step changes nothing).

    Returns:
      `HotwordGraph` with S = the trie's nodes (1 + distinct prefixes).
    """
    if not isinstance(vocab_size, int) or vocab_size < 2:
        raise ValueError(f"vocab_size must be an int >= 2, got {vocab_size!r}")
    if isinstance(scores, int | float):
        scores = [float(scores)] * len(phrases)
    if len(scores) != len(phrases):
        raise ValueError(
            f"scores must be one number or one per phrase ({len(phrases)}), "
            f"got {len(scores)}"
        )
    children: list[dict[int, int]] = [{}]
    depth, edge, end = [0.0], [0.0], [0.0]
    for i, (phrase, score) in enumerate(zip(phrases, scores, strict=True)):
        labels = [int(x) for x in phrase]
        if not labels or any(x == blank or not 0 <= x < vocab_size for x in labels):
            raise ValueError(
                f"phrases[{i}] must be labels in [0, {vocab_size}) other than the "
                f"blank {blank}, and not empty, got {list(phrase)}"
            )
        if not score > 0:
            raise ValueError(f"scores[{i}] must be > 0, got {score!r}")
        node = 0
        for label in labels:
            if label not in children[node]:
                children[node][label] = len(children)
                children.append({})
                depth.append(0.0)
                edge.append(0.0)
                end.append(0.0)
            child = children[node][label]
            edge[child] = max(edge[child], float(score))
            node = child
        end[node] = 1.0
    states = len(children)
    fail = [0] * states
    order, head = [0], 0
    while head < len(order):  # breadth first: parents before children
        node = order[head]
        head += 1
        for label, child in children[node].items():
            depth[child] = depth[node] + edge[child]
            back = fail[node]
            while node and back and label not in children[back]:
                back = fail[back]
            found = children[back].get(label) if node else None
            fail[child] = found if found is not None and found != child else 0
            order.append(child)
    completion = [0.0] * states
    goto = np.zeros([states, vocab_size], np.int32)
    for node in order:  # a phrase ends here, or at a suffix (output links)
        completion[node] = end[node] * depth[node] + (
            completion[fail[node]] if node else 0
        )
        goto[node] = goto[fail[node]] if node else 0
        for label, child in children[node].items():
            goto[node, label] = child
        goto[node, blank] = node
    depth_array = np.asarray(depth, np.float32)
    lands = goto
    delta = (
        depth_array[lands]
        - depth_array[:, None]
        + np.asarray(completion, np.float32)[lands]
    )
    delta[:, blank] = 0.0
    return HotwordGraph(goto, delta.astype(np.float32), depth_array)


def check_hotwords(hotwords: Any, vocab_size: int | None = None) -> None:
    """A clear error unless hotwords is a `HotwordGraph` (of vocab_size classes)."""
    if not isinstance(hotwords, HotwordGraph):
        raise ValueError(
            f"hotwords must be a HotwordGraph (decoding.hotword_graph), got "
            f"{type(hotwords).__name__}"
        )
    if vocab_size is not None and hotwords.goto.shape[1] != vocab_size:
        raise ValueError(
            f"hotwords are made for {hotwords.goto.shape[1]} classes, the model "
            f"has {vocab_size}"
        )


def read_hotwords(
    path: str, text_encoder: Any, score: float = 1.5
) -> tuple[list[list[int]], list[float]]:
    """Phrases and their per-label scores from a text file.

    One phrase per line; a line may end with " :SCORE" (sherpa-onnx's form)
    to give that phrase its own boost per label. Blank lines and lines
    starting with "#" are skipped.

    Returns:
      (label sequences, scores), for `hotword_graph`.
    """
    phrases, scores = [], []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            own = score
            if " :" in text:
                text, _, value = text.rpartition(" :")
                try:
                    own = float(value)
                except ValueError:
                    raise ValueError(
                        f"{path}:{number}: the score after ' :' must be a number, "
                        f"got {value!r}"
                    ) from None
            labels = text_encoder.encode(text.strip())
            if not labels:
                raise ValueError(f"{path}:{number}: {text!r} encodes to no labels")
            phrases.append(labels)
            scores.append(own)
    if not phrases:
        raise ValueError(f"{path}: no hotwords in the file")
    return phrases, scores
