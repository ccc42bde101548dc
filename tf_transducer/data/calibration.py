# SPDX-License-Identifier: Apache-2.0
"""Representative audio for full-integer (int8) quantisation of exports."""

from collections.abc import Sequence

import numpy as np

from tf_transducer.data.audio import read_audio
from tf_transducer.data.layouts import load_utterances


def calibration_audio(
    manifests: str | Sequence[str], sample_rate: int, count: int = 200
) -> list[np.ndarray]:
    """`count` utterances spread evenly over manifests, as float32 signals.

    What `export_transducer` / `export_deepspeech(..., quantization="int8",
    calibration_audio=...)` take: the training data's own audio, so that the
    int8 ranges cover what the model meets.

    Args:
      manifests: a manifest path or a list of them (.csv / .jsonl), or
        corpora (`corpus_utterances`).
      sample_rate: Hz to read (resample) them at: the model's.
      count: utterances (all of them when there are fewer).

    Returns:
      A list of float32 arrays [N].

    Raises:
      ValueError: no utterances, or count < 1.
    """
    if isinstance(manifests, str):
        manifests = [manifests]
    if not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be a positive int, got {count!r}")
    utterances = [u for path in manifests for u in load_utterances(path)]
    if not utterances:
        raise ValueError(f"manifests {list(manifests)} hold no utterances")
    picks = np.linspace(0, len(utterances) - 1, min(count, len(utterances)))
    return [
        read_audio(u.path, sample_rate, u.offset, u.duration)
        for u in (utterances[i] for i in sorted(set(picks.astype(int))))
    ]
