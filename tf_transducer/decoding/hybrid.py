# SPDX-License-Identifier: Apache-2.0
"""Decoding a hybrid Transducer's CTC head (a model built with ctc_weight > 0).

The CTC head is a linear projection of the encoder output: its best path
costs one matrix product per frame and no prediction network, and its
prefix beam search takes a word LM as DeepSpeech's does.
"""

from typing import TYPE_CHECKING

import numpy as np

from tf_transducer._checks import TensorLike
from tf_transducer.decoding.ctc import check_beam_width
from tf_transducer.decoding.ctc import ctc_beam_search
from tf_transducer.decoding.ctc import ctc_greedy_decode
from tf_transducer.decoding.lm import WordScorer

if TYPE_CHECKING:
    from tf_transducer.models import Transducer

DECODERS = ("transducer", "ctc")


def check_decoder(decoder: str, model: "Transducer") -> None:
    """A clear error for a decoder the model cannot run."""
    if decoder not in DECODERS:
        raise ValueError(f"decoder must be one of {DECODERS}, got {decoder!r}")
    if decoder == "ctc" and getattr(model, "ctc_head", None) is None:
        raise ValueError(
            'decoder="ctc" needs a CTC head: this Transducer was built with '
            "ctc_weight 0 (train one with ctc_weight > 0)"
        )


def transducer_ctc_decode(
    model: "Transducer", inputs: tuple[TensorLike, TensorLike], beam_width: int = 1,
    scorer: WordScorer | None = None, alpha: float = 0.75, beta: float = 1.85,
) -> list[list[int]]:  # fmt: skip
    """B label lists from a hybrid Transducer's CTC head.

    Args:
      model: a `Transducer` built with ctc_weight > 0.
      inputs: (features [B, T, F], lengths [B]), or what the model takes.
      beam_width: 1 (and no scorer): the best path (`ctc_greedy_decode`);
        else CTC prefix beam search (`ctc_beam_search`).
      scorer: an optional `WordScorer` fused in the beam search.
      alpha: the LM weight.
      beta: the word insertion bonus.

    Returns:
      B lists of label ids. Eager only.
    """
    check_decoder("ctc", model)
    check_beam_width(beam_width)
    logits, lengths = model.ctc_logits(inputs)
    logits, lengths = np.asarray(logits, np.float32), np.asarray(lengths)
    if beam_width == 1 and scorer is None:
        return ctc_greedy_decode(logits, lengths)
    return ctc_beam_search(logits, lengths, beam_width, scorer=scorer, alpha=alpha,
                           beta=beta)  # fmt: skip
