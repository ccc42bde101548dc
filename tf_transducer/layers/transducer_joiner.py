# SPDX-License-Identifier: Apache-2.0
"""TransducerJoiner: projections, add, tanh, output projection."""

from typing import Any

import keras
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import check_positive
from tf_transducer._checks import with_attributes
from tf_transducer.layers._checks import Shape


@keras.saving.register_keras_serializable(package="tf_transducer")
class TransducerJoiner(keras.layers.Layer):
    """logits = W_out tanh(W_enc encoder + W_dec decoder) + b.

    `project_encoder` / `project_decoder` apply the input projections (done
    once per frame and per label), `joint` the rest on projected inputs that
    broadcast against each other, e.g. [B, T, 1, J] and [B, 1, U + 1, J] for
    full logits, or [B, T, 1, J] and [B, T, s_range, J] for pruned ones (what
    `PrunedRnntLoss` calls). `output_weights` and `activation` are what
    `FusedRnntLoss` needs to compute the loss of the projections without
    forming the logits (`tf_transducer.ops.rnnt_joint.rnnt_loss_joint`).

    Args:
      vocab_size: classes including the blank.
      units: joint width J.
    """

    activation = "tanh"  # what `joint` applies to the sum of the projections

    def __init__(self, vocab_size: int, units: int = 256, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        check_positive("vocab_size", vocab_size, int)
        check_positive("units", units, int)
        self.vocab_size, self.units = vocab_size, units
        self.supports_masking = True  # full logits keep the encoder's frame mask
        self.encoder_projection = keras.layers.Dense(units, name="encoder_projection")
        self.decoder_projection = keras.layers.Dense(
            units, use_bias=False, name="decoder_projection"
        )
        self.output_projection = keras.layers.Dense(
            vocab_size, name="output_projection"
        )

    def build(self, encoded_shape: Shape, decoded_shape: Shape | None = None) -> None:
        self.encoder_projection.build((None, encoded_shape[-1]))
        self.decoder_projection.build((None, (decoded_shape or encoded_shape)[-1]))
        self.output_projection.build((None, self.units))
        self.built = True

    def project_encoder(self, encoded: TensorLike) -> tf.Tensor:
        return self.encoder_projection(encoded)

    def project_decoder(self, decoded: TensorLike) -> tf.Tensor:
        return self.decoder_projection(decoded)

    def output_weights(self) -> tuple[keras.Variable, keras.Variable]:
        """The output projection's kernel [J, V] and bias [V]: the variables.

        Not copies: a loss that reads them (`FusedRnntLoss`) trains them.
        """
        if not self.output_projection.built:
            raise ValueError(
                f"the joiner {self.name!r} must be built (called, or built with "
                "the encoder's and decoder's shapes) before its output weights "
                "are read"
            )
        return self.output_projection.kernel, self.output_projection.bias

    def joint(
        self, encoder_projected: tf.Tensor, decoder_projected: tf.Tensor
    ) -> tf.Tensor:
        return self.output_projection(tf.tanh(encoder_projected + decoder_projected))

    def call(self, encoded: TensorLike, decoded: TensorLike) -> tf.Tensor:
        """Full logits [B, T, U + 1, V] of encoded [B, T, H], decoded [B, U + 1, H]."""
        enc = self.project_encoder(encoded)[:, :, tf.newaxis, :]
        dec = self.project_decoder(decoded)[:, tf.newaxis, :, :]
        return self.joint(enc, dec)

    def get_config(self) -> dict[str, Any]:
        return with_attributes(super().get_config(), self, "vocab_size", "units")
