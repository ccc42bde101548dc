# SPDX-License-Identifier: Apache-2.0
"""RecognitionLatticeLoss: the negative log-likelihood of a recognition lattice."""

from collections.abc import Mapping
from typing import Any

import keras
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer.losses.base import LabelSequenceLoss


@keras.saving.register_keras_serializable(package="tf_transducer")
class RecognitionLatticeLoss(LabelSequenceLoss):
    """-log P(labels | frames) of a `tf_transducer.lattice.RecognitionLattice`.

    Locally or globally normalised as the lattice's weight function decides
    (see RecognitionLattice). The lattice holds trained weights, so it
    belongs to the model, which hands it over with the frames:

    Args (of the call):
      y_true: int [B, U] labels in [1, V] (0 is the blank), padded with pad_id.
      y_pred: a mapping with
        "frames": float [B, T, F], the encoder's frames;
        "num_frames": optional int [B] (else a Keras mask on "frames", else T);
        "lattice": the RecognitionLattice.
      sample_weight: optional [B] weights.

    `tf_transducer.models.LatticeModel` does this in its `compute_loss`.
    """

    _KEYS = ("frames", "lattice")

    def __init__(
        self,
        pad_id: int = -1,
        reduction: str | None = "sum_over_batch_size",
        name: str = "lattice_loss",
        dtype: str | keras.DTypePolicy | None = None,
    ) -> None:
        super().__init__(pad_id, reduction, name, dtype)

    def _per_utterance(self, y_true: TensorLike, y_pred: Any) -> tf.Tensor:
        if not isinstance(y_pred, Mapping) or any(k not in y_pred for k in self._KEYS):
            raise ValueError(
                f"y_pred must be a mapping with keys {self._KEYS} (and optionally "
                f'"num_frames"), got {y_pred!r:.200}'
            )
        lattice = y_pred["lattice"]
        if not callable(getattr(lattice, "string_forward", None)):
            raise ValueError(
                f'y_pred["lattice"] must be a RecognitionLattice, got {lattice!r}'
            )
        frames = tf.convert_to_tensor(y_pred["frames"])
        num_frames = y_pred.get("num_frames")
        if num_frames is None:
            num_frames = self._frame_counts(
                tf.shape(frames)[1],
                tf.shape(frames)[0],
                getattr(frames, "_keras_mask", None),
                'y_pred["frames"]',
            )
        labels, num_labels = self._labels(
            y_true, lattice.vocab_size + 1, tf.shape(frames)[0], excluded=0
        )
        return lattice(frames, num_frames, labels, num_labels)
