# SPDX-License-Identifier: Apache-2.0
"""Decoding: CTC, transducer and Neural Transducer search, n-gram LMs, error rates."""

from tf_transducer.decoding.ctc import ctc_beam_search
from tf_transducer.decoding.ctc import ctc_greedy_decode
from tf_transducer.decoding.graph_beam import BeamGraphState
from tf_transducer.decoding.graph_beam import beam_graph_start
from tf_transducer.decoding.graph_beam import modified_beam_continue
from tf_transducer.decoding.graph_beam import modified_beam_graph
from tf_transducer.decoding.graph_beam import transducer_beam_graph
from tf_transducer.decoding.graph_greedy import GraphHypotheses
from tf_transducer.decoding.graph_greedy import GraphSteps
from tf_transducer.decoding.graph_greedy import GreedyGraphState
from tf_transducer.decoding.graph_greedy import greedy_graph_start
from tf_transducer.decoding.graph_greedy import keras_graph_steps
from tf_transducer.decoding.graph_greedy import label_looping_continue
from tf_transducer.decoding.graph_greedy import label_looping_greedy
from tf_transducer.decoding.graph_greedy import transducer_greedy_graph
from tf_transducer.decoding.graph_tdt_beam import tdt_beam_graph
from tf_transducer.decoding.hotwords import HotwordGraph
from tf_transducer.decoding.hotwords import hotword_graph
from tf_transducer.decoding.hotwords import read_hotwords
from tf_transducer.decoding.hybrid import transducer_ctc_decode
from tf_transducer.decoding.lm import ArpaModel
from tf_transducer.decoding.lm import KenLMModel
from tf_transducer.decoding.lm import WordScorer
from tf_transducer.decoding.lm import load_language_model
from tf_transducer.decoding.metrics import char_error_rate
from tf_transducer.decoding.metrics import edit_distance
from tf_transducer.decoding.metrics import word_error_rate
from tf_transducer.decoding.neural_transducer import neural_transducer_beam_search
from tf_transducer.decoding.neural_transducer import neural_transducer_greedy_decode
from tf_transducer.decoding.recognize import recognize
from tf_transducer.decoding.tdt import tdt_beam_search
from tf_transducer.decoding.tdt import tdt_greedy_search
from tf_transducer.decoding.timestamps import TimedWord
from tf_transducer.decoding.timestamps import frame_seconds
from tf_transducer.decoding.timestamps import hypotheses_as_json
from tf_transducer.decoding.timestamps import timed_words
from tf_transducer.decoding.token_lm import TokenLm
from tf_transducer.decoding.token_lm import token_lm
from tf_transducer.decoding.transducer import KerasSteps
from tf_transducer.decoding.transducer import beam_search
from tf_transducer.decoding.transducer import greedy_search
from tf_transducer.decoding.transducer import modified_beam_search
from tf_transducer.decoding.transducer import transducer_beam_search
from tf_transducer.decoding.transducer import transducer_greedy_decode

__all__ = [
    "ArpaModel",
    "BeamGraphState",
    "GraphHypotheses",
    "GraphSteps",
    "GreedyGraphState",
    "HotwordGraph",
    "KenLMModel",
    "KerasSteps",
    "TimedWord",
    "TokenLm",
    "WordScorer",
    "beam_graph_start",
    "beam_search",
    "char_error_rate",
    "ctc_beam_search",
    "ctc_greedy_decode",
    "edit_distance",
    "frame_seconds",
    "greedy_graph_start",
    "greedy_search",
    "hotword_graph",
    "hypotheses_as_json",
    "keras_graph_steps",
    "label_looping_continue",
    "label_looping_greedy",
    "load_language_model",
    "modified_beam_continue",
    "modified_beam_graph",
    "modified_beam_search",
    "neural_transducer_beam_search",
    "neural_transducer_greedy_decode",
    "read_hotwords",
    "recognize",
    "tdt_beam_graph",
    "tdt_beam_search",
    "tdt_greedy_search",
    "timed_words",
    "token_lm",
    "transducer_beam_graph",
    "transducer_ctc_decode",
    "transducer_beam_search",
    "transducer_greedy_decode",
    "transducer_greedy_graph",
    "word_error_rate",
]
