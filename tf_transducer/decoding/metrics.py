# SPDX-License-Identifier: Apache-2.0
"""Word and character error rates (Levenshtein distance over words / characters)."""

from collections.abc import Sequence


def edit_distance(reference: Sequence, hypothesis: Sequence) -> int:
    """Insertions + deletions + substitutions turning reference into hypothesis."""
    previous = list(range(len(hypothesis) + 1))
    for i, r in enumerate(reference, 1):
        current = [i]
        for j, h in enumerate(hypothesis, 1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (r != h))
            )
        previous = current
    return previous[-1]


def word_error_rate(references: Sequence[str], hypotheses: Sequence[str]) -> float:
    """Total word edit distance / total reference words (corpus WER)."""
    return _error_rate(references, hypotheses, str.split)


def char_error_rate(references: Sequence[str], hypotheses: Sequence[str]) -> float:
    """Total character edit distance / total reference characters (corpus CER)."""
    return _error_rate(references, hypotheses, list)


def _error_rate(references, hypotheses, tokens):
    if len(references) != len(hypotheses):
        raise ValueError(
            f"{len(references)} references but {len(hypotheses)} hypotheses"
        )
    errors = sum(
        edit_distance(tokens(r), tokens(h))
        for r, h in zip(references, hypotheses, strict=True)
    )
    total = sum(len(tokens(r)) for r in references)
    return errors / max(total, 1)
