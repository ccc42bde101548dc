# SPDX-License-Identifier: Apache-2.0
"""TransducerJoiner: projections, add, tanh, output projection."""

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import check_positive
from tf_transducer._checks import with_attributes
from tf_transducer.layers._checks import Shape
from tf_transducer.ops.tdt import check_durations


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

    With `durations`, the joiner is a Token-and-Duration Transducer's: a
    second output layer on the same hidden activation gives the duration
    logits [..., K] (`joint_heads`, `TdtLoss`; `duration_weights` for
    `FusedTdtLoss`), normalised apart from the tokens'.

    Args:
      vocab_size: classes including the blank.
      units: joint width J.
      durations: None (an RNN-T joiner), or the K frame counts of a duration
        head, e.g. [0, 1, 2, 3, 4]: sorted, distinct, >= 0, with 0 and 1.
    """

    activation = "tanh"  # what `joint` applies to the sum of the projections

    def __init__(
        self, vocab_size: int, units: int = 256,
        durations: Sequence[int] | None = None, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(**kwargs)
        check_positive("vocab_size", vocab_size, int)
        check_positive("units", units, int)
        self.vocab_size, self.units = vocab_size, units
        self.durations = None if durations is None else check_durations(durations)
        self.supports_masking = True  # full logits keep the encoder's frame mask
        self.encoder_projection = keras.layers.Dense(units, name="encoder_projection")
        self.decoder_projection = keras.layers.Dense(
            units, use_bias=False, name="decoder_projection"
        )
        self.output_projection = keras.layers.Dense(
            vocab_size, name="output_projection"
        )
        self.duration_projection = (
            None
            if self.durations is None
            else keras.layers.Dense(len(self.durations), name="duration_projection")
        )

    def build(self, encoded_shape: Shape, decoded_shape: Shape | None = None) -> None:
        self.encoder_projection.build((None, encoded_shape[-1]))
        self.decoder_projection.build((None, (decoded_shape or encoded_shape)[-1]))
        self.output_projection.build((None, self.units))
        if self.duration_projection is not None:
            self.duration_projection.build((None, self.units))
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

    def duration_weights(self) -> tuple[keras.Variable, keras.Variable]:
        """The duration head's kernel [J, K] and bias [K]: the variables.

        What `FusedTdtLoss` trains without forming the joint's logits.
        """
        if self.duration_projection is None:
            raise ValueError(
                f"the joiner {self.name!r} has no duration head: build it with "
                "durations=[0, 1, ...] for a Token-and-Duration Transducer"
            )
        self.output_weights()  # built, or a clear error
        return self.duration_projection.kernel, self.duration_projection.bias

    def joint_heads(
        self, encoder_projected: tf.Tensor, decoder_projected: tf.Tensor
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """(token logits [..., V], duration logits [..., K]) of a TDT joiner."""
        if self.duration_projection is None:
            raise ValueError(
                f"the joiner {self.name!r} has no duration head: build it with "
                "durations=[0, 1, ...] for a Token-and-Duration Transducer"
            )
        hidden = tf.tanh(encoder_projected + decoder_projected)
        return self.output_projection(hidden), self.duration_projection(hidden)

    def call(self, encoded: TensorLike, decoded: TensorLike) -> tf.Tensor:
        """Full logits [B, T, U + 1, V] of encoded [B, T, H], decoded [B, U + 1, H]."""
        enc = self.project_encoder(encoded)[:, :, tf.newaxis, :]
        dec = self.project_decoder(decoded)[:, tf.newaxis, :, :]
        return self.joint(enc, dec)

    def get_config(self) -> dict[str, Any]:
        config = with_attributes(super().get_config(), self, "vocab_size", "units")
        if self.durations is not None:  # (a plain joiner's config as before)
            config["durations"] = list(self.durations)
        return config
