# SPDX-License-Identifier: Apache-2.0
"""A Keras model around a recognition lattice (GNAT: local or global norm)."""

from typing import Any

import keras
import tensorflow as tf

from tf_transducer.lattice import RecognitionLattice
from tf_transducer.losses import RecognitionLatticeLoss
from tf_transducer.models import _inputs


@keras.saving.register_keras_serializable(package="tf_transducer")
class LatticeModel(keras.Model):
    """An encoder followed by a `RecognitionLattice`.

    `model((features [B, T, F], lengths [B]))` gives {"frames": encoder
    output [B, T, H], "num_frames": [B]}; compile with
    `loss=RecognitionLatticeLoss()` and `fit` on ((features, lengths),
    labels [B, U] padded with -1). `tf_transducer.decoding.recognize` reads
    the lattice's best path.

    Args:
      lattice: the RecognitionLattice (its weight function sees the frames).
      encoder: a Keras layer [B, T, F] -> [B, T, H] keeping the length
        (e.g. a Sequential of Dense / unidirectional LSTM layers); None
        passes the features through.
    """

    def __init__(
        self,
        lattice: RecognitionLattice | dict[str, Any],
        encoder: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        lattice, encoder = _inputs.deserialized(lattice), _inputs.deserialized(encoder)
        if not isinstance(lattice, RecognitionLattice):
            raise ValueError(f"lattice must be a RecognitionLattice, got {lattice!r}")
        self.lattice, self.encoder = lattice, encoder

    def build(self, input_shape: Any) -> None:
        self.lattice.build(_inputs.encoded_shape(input_shape, self.encoder))
        self.built = True

    def get_config(self) -> dict[str, Any]:
        return _inputs.with_parts(super().get_config(), self, "lattice", "encoder")

    def call(self, inputs: Any, training: bool | None = False) -> dict[str, tf.Tensor]:
        frames, lengths = _inputs.encoded(self.encoder, inputs, training)
        return {"frames": frames, "num_frames": lengths}

    def compute_loss(
        self, x: Any = None, y: Any = None, y_pred: Any = None,
        sample_weight: Any = None, training: bool = True,
    ) -> tf.Tensor:  # fmt: skip
        """The compiled RecognitionLatticeLoss of labels y given y_pred."""
        if not isinstance(self.loss, RecognitionLatticeLoss):
            raise ValueError(
                "compile the LatticeModel with loss=RecognitionLatticeLoss(), got "
                f"{self.loss!r}"
            )
        loss = self.loss(y, dict(y_pred, lattice=self.lattice), sample_weight)
        return _inputs.plus_added_losses(self, loss)
