# SPDX-License-Identifier: Apache-2.0
"""Word times and word confidence from a hypothesis' labels, frames and confidence.

A label starts a word when the text decoded so far gains a word with it,
and extends the last word when that word's text changes; labels that add
no text (a word delimiter, a space, a lone SentencePiece word mark) belong
to no word. This holds for every text
encoder (characters with a space, SentencePiece pieces with their word
marks, a word-delimiter class), since it only asks the encoder to decode.

A word ends one frame after its last label's frame. It starts, by
default ("boundary"), at the frame of the first label before it that adds
no text (a word delimiter, a space, a lone word mark), where there is one,
else at its first label's. A streaming model emits a word's own labels
once it has heard enough of it (a whole-word label some 200-300 ms in),
but the boundary class as the next word sets in: on the demo's real
recordings with known word times, starts within 80 ms went from 0% of the
words (first label) to 35-72% of all words and 42-90% of those with a
boundary before them (benchmarks/bench_timestamps.py). "label" starts
every word at its first label. Frames become seconds through the
encoder's subsampling and the features' hop (`frame_seconds`). A word's
confidence aggregates its labels' ("min", as NeMo's default, "mean" or
"prod").
"""

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

AGGREGATES = ("min", "mean", "prod")
STARTS = ("boundary", "label")


@dataclass(frozen=True)
class TimedWord:
    """A word, its start and end in seconds, and its confidence in [0, 1]."""

    word: str
    start: float
    end: float
    confidence: float


def frame_seconds(subsampling: int, hop_seconds: float) -> float:
    """Seconds per encoder frame: the features' hop times the subsampling."""
    if not isinstance(subsampling, int) or subsampling < 1:
        raise ValueError(f"subsampling must be an int >= 1, got {subsampling!r}")
    if not hop_seconds > 0:
        raise ValueError(f"hop_seconds must be > 0, got {hop_seconds!r}")
    return subsampling * float(hop_seconds)


def _aggregate(values: list[float], how: str) -> float:
    if how == "min":
        return min(values)
    if how == "mean":
        return sum(values) / len(values)
    return math.prod(values)


def timed_words(
    labels: ArrayLike,
    frames: ArrayLike,
    confidence: ArrayLike,
    text_encoder: Any,
    seconds_per_frame: float,
    aggregate: str = "min",
    starts: str = "boundary",
) -> list[TimedWord]:
    """The words of one hypothesis with their times and confidence.

    Args:
      labels: the hypothesis' N labels (no padding).
      frames: the encoder frame of each label [N].
      confidence: each label's confidence [N].
      text_encoder: what decodes the labels (`decode(ids) -> str`).
      seconds_per_frame: seconds per encoder frame (`frame_seconds`).
      aggregate: "min", "mean" or "prod" of a word's label confidences.
      starts: "boundary" (a word starts at the first label before it that
        adds no text, if any) or "label" (at its first label); see the
        module.

    Returns:
      the `TimedWord`s, in order; their words are the decoded text's.
    """
    if aggregate not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {AGGREGATES}, got {aggregate!r}")
    if starts not in STARTS:
        raise ValueError(f"starts must be one of {STARTS}, got {starts!r}")
    labels = [int(x) for x in np.ravel(labels)]
    frames, confidence = np.ravel(frames), np.ravel(confidence)
    if not len(labels) == len(frames) == len(confidence):
        raise ValueError(
            f"labels, frames and confidence must be as long as each other, got "
            f"{len(labels)}, {len(frames)} and {len(confidence)}"
        )
    words: list[list[Any]] = []  # [text, first frame, last frame, confidences]
    before: list[str] = []
    boundary = None  # the frame of the first textless label since the last word
    for i, (frame, sure) in enumerate(zip(frames, confidence, strict=True)):
        after = text_encoder.decode(labels[: i + 1]).split()
        if len(after) > len(before):
            start = int(frame) if boundary is None else boundary
            words.append([after[-1], start, int(frame), [float(sure)]])
            boundary = None
        elif after and after != before:  # the last word's text changed
            words[-1][0] = after[-1]
            words[-1][2] = int(frame)
            words[-1][3].append(float(sure))
        elif starts == "boundary" and boundary is None:
            boundary = int(frame)
        before = after
    return [
        TimedWord(
            word,
            first * seconds_per_frame,
            (last + 1) * seconds_per_frame,
            _aggregate(sure, aggregate),
        )  # fmt: skip
        for word, first, last, sure in words
    ]


def word_records(
    words: Sequence[TimedWord], times: bool = True, confidence: bool = True
) -> list[dict[str, Any]]:
    """The words as JSON-ready dicts.

    Each has "word", and "start" and "end" (with times) and "confidence"
    (with confidence), rounded to 3 places.
    """
    records = []
    for word in words:
        record: dict[str, Any] = {"word": word.word}
        if times:
            record.update(start=round(word.start, 3), end=round(word.end, 3))
        if confidence:
            record["confidence"] = round(word.confidence, 3)
        records.append(record)
    return records


def hypotheses_as_json(
    hyps: Any,
    text_encoder: Any,
    seconds_per_frame: float,
    aggregate: str = "min",
    names: Sequence[str] | None = None,
) -> list[str]:
    """One JSON line per utterance of `GraphHypotheses`: text, words, times.

    Each line: {"file" (when names are given), "text", "words": [{"word",
    "start", "end", "confidence"}]}, times in seconds rounded to the
    millisecond.
    """
    labels, count = np.asarray(hyps.labels), np.asarray(hyps.label_length)
    at, sure = np.asarray(hyps.frames), np.asarray(hyps.confidence)
    if names is not None and len(names) != len(count):
        raise ValueError(f"names must have one name per utterance ({len(count)}), "
                         f"got {len(names)}")  # fmt: skip
    lines = []
    for b, n in enumerate(count):
        words = timed_words(labels[b, :n], at[b, :n], sure[b, :n], text_encoder,
                            seconds_per_frame, aggregate)  # fmt: skip
        record: dict[str, Any] = {} if names is None else {"file": names[b]}
        record["text"] = text_encoder.decode(labels[b, :n])
        record["words"] = word_records(words)
        lines.append(json.dumps(record))
    return lines
