"""Decoding: CTC greedy / beam search with n-gram LMs; error rates."""

from tf_transducer.decoding.ctc import ctc_beam_search, ctc_greedy_decode
from tf_transducer.decoding.lm import (
    ArpaModel,
    KenLMModel,
    WordScorer,
    load_language_model,
)
from tf_transducer.decoding.metrics import (
    char_error_rate,
    edit_distance,
    word_error_rate,
)

__all__ = [
    "ArpaModel",
    "KenLMModel",
    "WordScorer",
    "char_error_rate",
    "ctc_beam_search",
    "ctc_greedy_decode",
    "edit_distance",
    "load_language_model",
    "word_error_rate",
]
