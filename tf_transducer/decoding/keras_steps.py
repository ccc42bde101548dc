# SPDX-License-Identifier: Apache-2.0
"""The step functions of a Keras `Transducer`, traced once per model.

Called eagerly, a Keras layer pays Python dispatch on every op, and a
recurrent encoder runs its time loop in Python: on one core the demo's LSTM
encoder takes ~0.36 s for 3 s of audio eagerly and ~10 ms traced, and a
prediction-network step ~1.9 ms against ~0.5 ms. The searches call these
functions per frame and per symbol, so each model's are traced once
(`tf.function`, shapes relaxed after the first retrace) and kept while the
model lives.
"""

from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer.decoding._hypotheses import State
from tf_transducer.decoding.graph_greedy import keras_graph_steps

if TYPE_CHECKING:
    from tf_transducer.models import Transducer


class _Traced:
    """A model's encoder (projected) and step functions as `tf.function`s."""

    def __init__(self, model: "Transducer") -> None:
        joiner = model.joiner

        def encode(features, lengths):
            encoded, lengths = model.encode((features, lengths), training=False)
            return joiner.project_encoder(encoded), lengths

        def trace(function):
            return tf.function(function, reduce_retracing=True, autograph=False)

        self.encode = trace(encode)
        self.predict = trace(keras_graph_steps(model).predict)
        self.joint = trace(joiner.joint)
        self.joint_heads = trace(joiner.joint_heads)


def traced(model: "Transducer") -> _Traced:
    """The model's traced functions (made on first use, kept while it lives).

    Kept on the model past Keras' attribute tracking, so saving it does not
    see them; the model and its functions are freed together.
    """
    functions = model.__dict__.get("_tt_traced_steps")
    if functions is None:
        functions = _Traced(model)
        object.__setattr__(model, "_tt_traced_steps", functions)
    return functions


def encode_projected(
    model: "Transducer", inputs: tuple[TensorLike, TensorLike]
) -> tuple[np.ndarray, np.ndarray]:
    """Projected encoder frames float [B, T', J] and frames int [B].

    Args:
      model: a `Transducer`.
      inputs: (features float [B, T, F], lengths int [B]).
    """
    features, lengths = inputs
    projected, lengths = traced(model).encode(features, lengths)
    return np.asarray(projected), np.asarray(lengths)


class KerasSteps:
    """The step functions of a Keras `Transducer` (`TransducerSteps`, `TdtSteps`)."""

    def __init__(self, model: "Transducer") -> None:
        self.model = model
        self.blank = 0
        self._traced = traced(model)

    def start(self, batch: int) -> tuple[np.ndarray, State]:
        state = [np.asarray(s) for s in self.model.predictor.initial_state(batch)]
        return self.predict(np.zeros([batch], np.int32), state)

    def predict(self, labels: np.ndarray, state: State) -> tuple[np.ndarray, State]:
        projected, state = self._traced.predict(np.asarray(labels, np.int32), state)
        return np.asarray(projected), [np.asarray(s) for s in state]

    def joint(self, encoder: np.ndarray, decoder: np.ndarray) -> np.ndarray:
        return np.asarray(self._traced.joint(encoder, decoder))

    def joint_heads(
        self, encoder: np.ndarray, decoder: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(token logits [B, V], duration logits [B, K]) of a TDT joiner."""
        tokens, durations = self._traced.joint_heads(encoder, decoder)
        return np.asarray(tokens), np.asarray(durations)
