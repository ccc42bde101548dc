# SPDX-License-Identifier: Apache-2.0
"""A Keras model: an encoder and the Neural Transducer (Jaitly et al. 2015)."""

from typing import Any

import keras
import tensorflow as tf

from tf_transducer.layers.neural_transducer import NeuralTransducer
from tf_transducer.losses import NeuralTransducerLoss
from tf_transducer.models import _inputs


@keras.saving.register_keras_serializable(package="tf_transducer")
class NeuralTransducerModel(keras.Model):
    """An encoder followed by a `NeuralTransducer` layer.

    `model((features [B, T, F], lengths [B]))` gives {"encoder": [B, T, D],
    "lengths": [B]}; compile with `loss=NeuralTransducerLoss(W, e)` (W and e
    as the layer's) and `fit` on ((features, lengths), labels [B, U] padded
    with -1): the layer is run teacher-forced on the labels in
    `compute_loss`, which also tracks "error", the aligned outputs' edit
    distance per output (the Neural Transducer's frame error).
    `tf_transducer.decoding.recognize(model, inputs)` decodes greedily, block
    by block.

    Args:
      transducer: the NeuralTransducer layer.
      encoder: a Keras layer [B, T, F] -> [B, T, D] keeping the length (e.g.
        unidirectional LSTMs, for online use); None passes features through.
    """

    def __init__(
        self,
        transducer: NeuralTransducer | dict[str, Any],
        encoder: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        transducer, encoder = (
            _inputs.deserialized(transducer),
            _inputs.deserialized(encoder),
        )
        if not isinstance(transducer, NeuralTransducer):
            raise ValueError(
                f"transducer must be a NeuralTransducer layer, got {transducer!r}"
            )
        self.transducer, self.encoder = transducer, encoder
        self.error_tracker = keras.metrics.Mean(name="error")

    def build(self, input_shape: Any) -> None:
        shape = _inputs.encoded_shape(input_shape, self.encoder)
        if not self.transducer.built:
            self.transducer.build(shape)
        self.built = True

    def get_config(self) -> dict[str, Any]:
        return _inputs.with_parts(super().get_config(), self, "transducer", "encoder")

    def call(self, inputs: Any, training: bool | None = False) -> dict[str, tf.Tensor]:
        frames, lengths = _inputs.encoded(self.encoder, inputs, training)
        return {"encoder": frames, "lengths": lengths}

    @property
    def metrics(self) -> list[Any]:
        return [*super().metrics, self.error_tracker]

    def compute_loss(
        self, x: Any = None, y: Any = None, y_pred: Any = None,
        sample_weight: Any = None, training: bool = True,
    ) -> tf.Tensor:  # fmt: skip
        """The compiled NeuralTransducerLoss of labels y; updates "error"."""
        loss_fn = self.loss
        layer = self.transducer
        if not isinstance(loss_fn, NeuralTransducerLoss):
            raise ValueError(
                "compile the NeuralTransducerModel with loss=NeuralTransducerLoss"
                f"(...), got {loss_fn!r}"
            )
        if (loss_fn.transducer_max_width, loss_fn.e_symbol_index) != (
            layer.transducer_max_width,
            layer.e_symbol_index,
        ):
            raise ValueError(
                "the loss and the layer disagree: loss transducer_max_width="
                f"{loss_fn.transducer_max_width}, e_symbol_index="
                f"{loss_fn.e_symbol_index}; layer {layer.transducer_max_width}, "
                f"{layer.e_symbol_index}"
            )
        out = layer(y_pred["encoder"], y_pred["lengths"], y, training=training)
        out["aligned"] = loss_fn.aligned(y, out)  # one search for both
        loss = loss_fn(y, out, sample_weight)
        distance, outputs = loss_fn.errors(y, out)
        self.error_tracker.update_state(
            tf.reduce_sum(distance) / tf.maximum(tf.reduce_sum(outputs), 1.0)
        )
        return _inputs.plus_added_losses(self, loss)
