# SPDX-License-Identifier: Apache-2.0
"""PredictionNetwork: the transducer's label model, LSTM or stateless."""

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import after
from tf_transducer._checks import check_positive
from tf_transducer._checks import first_bad
from tf_transducer._checks import require
from tf_transducer._checks import with_attributes
from tf_transducer.layers._checks import OutputShape
from tf_transducer.layers._checks import Shape
from tf_transducer.layers._checks import TracedOutputSpec


@keras.saving.register_keras_serializable(package="tf_transducer")
class PredictionNetwork(TracedOutputSpec, keras.layers.Layer):
    """Embeds the previous labels and summarises them for the joiner.

    kind="lstm": Embedding + LSTM (the classic RNN-T prediction network);
    kind="stateless": Embedding + a causal 1-D convolution over the last
    `context_size` labels + ReLU (k2 / icefall's stateless decoder), whose
    state is just those labels.

    Inputs are label ids with the blank (0) as the start symbol: for training
    [blank, y_1, ..., y_S] -> [B, S + 1, units].

    Args:
      vocab_size: classes including the blank.
      embedding_dim: embedding width.
      units: output width.
      kind: "lstm" or "stateless".
      context_size: labels seen by the stateless variant.
    """

    def __init__(
        self, vocab_size: int, embedding_dim: int = 128, units: int = 256,
        kind: str = "lstm", context_size: int = 2, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(**kwargs)
        check_positive("vocab_size", vocab_size, int)
        check_positive("embedding_dim", embedding_dim, int)
        check_positive("units", units, int)
        check_positive("context_size", context_size, int)
        if kind not in ("lstm", "stateless"):
            raise ValueError(f'kind must be "lstm" or "stateless", got {kind!r}')
        self.vocab_size, self.embedding_dim, self.units = (
            vocab_size,
            embedding_dim,
            units,
        )
        self.kind, self.context_size = kind, context_size
        self.embedding = keras.layers.Embedding(vocab_size, embedding_dim)
        if kind == "lstm":
            self.lstm = keras.layers.LSTM(
                units, return_sequences=True, return_state=True
            )
        else:
            self.conv = keras.layers.Dense(units)  # over the concatenated context

    def build(self, labels_shape: Shape | None = None) -> None:
        self.embedding.build((None, None))
        if self.kind == "lstm":
            self.lstm.build((None, None, self.embedding_dim))
        else:
            self.conv.build((None, None, self.embedding_dim * self.context_size))
        self.built = True

    def _context(self, embedded):
        """[B, U, E] -> [B, U, context_size * E]: each label with its predecessors.

        Before the start, the padding is the blank's embedding.
        """
        k = self.context_size
        pad = tf.repeat(self.embedding(tf.zeros([1, 1], tf.int32)), k - 1, axis=1)
        pad = tf.tile(pad, [tf.shape(embedded)[0], 1, 1])
        x = tf.concat([pad, embedded], axis=1)
        windows = [x[:, i : tf.shape(x)[1] - (k - 1 - i)] for i in range(k)]
        return tf.concat(windows, axis=-1)

    def call(self, labels: TensorLike, training: bool | None = None) -> tf.Tensor:
        labels = tf.cast(labels, tf.int32)
        bad = (labels < 0) | (labels >= self.vocab_size)
        value, index = first_bad(bad, labels)
        with after(
            require(
                ~tf.reduce_any(bad),
                f"labels must lie in [0, vocab_size = {self.vocab_size}); got {{}} "
                "at [b, u] = {}",
                value,
                index,
            )
        ):
            embedded = self.embedding(labels)
        if self.kind == "lstm":
            out, _, _ = self.lstm(embedded, training=training)
            return out
        return tf.nn.relu(self.conv(self._context(embedded)))

    def compute_output_shape(self, labels_shape: Shape) -> OutputShape:
        return (labels_shape[0], labels_shape[1], self.units)

    def initial_state(self, batch: int) -> list[tf.Tensor]:
        """LSTM: zero (h, c); stateless: the last context_size labels (blanks)."""
        if self.kind == "lstm":
            return [
                tf.zeros([batch, self.units], self.compute_dtype),
                tf.zeros([batch, self.units], self.compute_dtype),
            ]
        return [tf.zeros([batch, self.context_size], tf.int32)]

    def step(
        self, labels: TensorLike, state: Sequence[tf.Tensor]
    ) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """One label per utterance [B] and the state -> (output [B, units], state)."""
        labels = tf.cast(labels, tf.int32)
        if self.kind == "lstm":
            out, new_state = self.lstm.cell(
                self.embedding(labels), list(state), training=False
            )
            return out, new_state
        history = tf.concat([state[0][:, 1:], labels[:, None]], axis=1)
        embedded = self.embedding(history)  # [B, k, E]
        flat = tf.reshape(embedded, [-1, self.context_size * self.embedding_dim])
        return tf.nn.relu(self.conv(flat)), [history]

    def get_config(self) -> dict[str, Any]:
        return with_attributes(
            super().get_config(), self, "vocab_size", "embedding_dim", "units", "kind",
            "context_size",
        )  # fmt: skip
