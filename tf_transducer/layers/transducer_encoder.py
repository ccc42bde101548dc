# SPDX-License-Identifier: Apache-2.0
"""TransducerEncoder: frame stacking + stacked LSTMs, offline or chunk by chunk."""

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import check_positive
from tf_transducer._checks import resolve_lengths
from tf_transducer._checks import with_attributes
from tf_transducer.layers._checks import ListLengths
from tf_transducer.layers._checks import Shape
from tf_transducer.layers._checks import TracedOutputSpec
from tf_transducer.layers.frame_stacking import FrameStacking
from tf_transducer.layers.streaming import EncoderShapes


@keras.saving.register_keras_serializable(package="tf_transducer")
class TransducerEncoder(
    EncoderShapes, TracedOutputSpec, ListLengths, keras.layers.Layer
):
    """Stacks `stack` frames (keeping every stack-th), then unidirectional LSTMs.

    Streaming by construction: output frame j sees input frames up to
    stack * (j + 1) - 1 only, so `step` on consecutive chunks (multiples of
    `stack` frames, LSTM states carried) equals the offline call.

    Args:
      units: LSTM width (and output width).
      num_layers: stacked LSTMs.
      stack: input frames per output frame (subsampling).
      dropout: between layers, in training.

    Call arguments:
      features: float [B, T, F]; lengths: optional int [B].

    Returns:
      (encoded [B, ceil(T / stack), units], lengths [B]).
    """

    def __init__(
        self, units: int = 256, num_layers: int = 2, stack: int = 3,
        dropout: float = 0.0, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(**kwargs)
        check_positive("units", units, int)
        check_positive("num_layers", num_layers, int)
        check_positive("stack", stack, int)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout}")
        self.units, self.num_layers, self.stack, self.dropout = (
            units,
            num_layers,
            stack,
            dropout,
        )
        self.stacking = FrameStacking(0, stack - 1, stride=stack)
        self.lstms = [
            keras.layers.LSTM(
                units, return_sequences=True, return_state=True, name=f"lstm_{i}"
            )
            for i in range(num_layers)
        ]
        self.dropouts = [keras.layers.Dropout(dropout) for _ in range(num_layers)]

    def build(self, features_shape: Shape, lengths_shape: Shape | None = None) -> None:
        if features_shape[-1] is None:
            raise ValueError(
                f"features must have a static last size F, got shape {features_shape}"
            )
        width = features_shape[-1] * self.stack
        for lstm in self.lstms:
            lstm.build((None, None, width))
            width = self.units
        self.built = True

    def call(
        self,
        features: TensorLike,
        lengths: TensorLike | None = None,
        training: bool | None = None,
    ) -> tuple[tf.Tensor, tf.Tensor]:
        lengths = resolve_lengths(features, lengths)
        x, lengths = self.stacking(features, lengths)
        mask = tf.sequence_mask(lengths, tf.shape(x)[1])
        for lstm, dropout in zip(self.lstms, self.dropouts, strict=True):
            x, _, _ = lstm(x, mask=mask, training=training)
            x = dropout(x, training=training)
        return x, lengths

    # The streaming-encoder contract (tf_transducer.layers.streaming).
    left_context: int | None = None  # an LSTM frame sees its whole past

    @property
    def subsampling(self) -> int:
        """Feature frames per output frame: `stack`."""
        return self.stack

    @property
    def default_chunk_frames(self) -> int:
        """Feature frames of a streaming step by default: 4 output frames.

        Any multiple of `stack` streams the LSTMs exactly.
        """
        return 4 * self.stack

    def initial_state(self, batch: int) -> list[tf.Tensor]:
        """Zero (h, c) of every layer: a list of 2 * num_layers [batch, units]."""
        return [
            tf.zeros([batch, self.units], self.compute_dtype)
            for _ in range(2 * self.num_layers)
        ]

    def step(
        self, features: Any, states: Sequence[Any], lengths: Any = None
    ) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """Encodes one streaming chunk: (encoded [B, n, units], new states).

        The chunk is stack * n frames [B, stack * n, F] (n static), with the
        states from before it. LSTMs unrolled (for TFLite). `lengths` (the
        chunk's valid frames) is accepted for the streaming contract and not
        needed: an output frame depends on no later input, so the frames
        past an utterance's end change only outputs that are dropped.
        """
        if features.shape[1] is None or features.shape[1] % self.stack:
            raise ValueError(
                f"a streaming chunk needs a static multiple of stack={self.stack} "
                f"frames, got {features.shape[1]}"
            )
        n = features.shape[1] // self.stack
        x = tf.reshape(features, [-1, n, self.stack * features.shape[-1]])
        new_states = []
        for i, lstm in enumerate(self.lstms):
            state = list(states[2 * i : 2 * i + 2])
            outputs = []
            for t in range(n):
                out, state = lstm.cell(x[:, t], state, training=False)
                outputs.append(out)
            x = tf.stack(outputs, axis=1)
            new_states += state
        return x, new_states

    def get_config(self) -> dict[str, Any]:
        return with_attributes(
            super().get_config(), self, "units", "num_layers", "stack", "dropout"
        )
