# SPDX-License-Identifier: Apache-2.0
"""CtcLoss: the CTC loss of logits as a Keras loss."""

from typing import Any

import keras
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import after
from tf_transducer._checks import finite_or_neg_inf
from tf_transducer.losses.base import LabelSequenceLoss
from tf_transducer.losses.base import check_blank


def ctc_feasible(
    labels: TensorLike, label_lengths: TensorLike, logit_lengths: TensorLike
) -> tf.Tensor:
    """bool [B]: whether some CTC alignment of the labels fits in the frames.

    A label sequence of length U with R adjacent repeats needs U + R frames
    (a blank between repeats).
    """
    labels = tf.cast(labels, tf.int32)
    pairs = tf.maximum(tf.shape(labels)[1] - 1, 0)  # adjacent label pairs
    inside = tf.range(pairs)[tf.newaxis] < (
        tf.cast(label_lengths, tf.int32)[:, tf.newaxis] - 1
    )
    repeats = tf.reduce_sum(
        tf.cast(inside & tf.equal(labels[:, 1:], labels[:, :-1]), tf.int32), axis=1
    )
    return tf.cast(label_lengths, tf.int32) + repeats <= tf.cast(
        logit_lengths, tf.int32
    )


@keras.saving.register_keras_serializable(package="tf_transducer")
class CtcLoss(LabelSequenceLoss):
    """The CTC loss of logits, as a Keras loss (`tf.nn.ctc_loss`, dense labels).

    Padding does not change the loss: labels are read up to their padding
    and frames up to each utterance's length.

    Args:
      blank: the blank index, in [0, C) (tf_transducer's convention: 0).
      pad_id: the value that pads label sequences; not a class index.
      zero_infinity: give 0 (and no gradient) for utterances no alignment
        can produce (more labels plus repeats than frames) instead of inf.
      reduction: as `RnntLoss`.

    Call arguments:
      y_true: int labels [B, S], padded with `pad_id`.
      y_pred: float logits [B, T, C]; its Keras mask [B, T], if any, gives
        each utterance's frames (else all T count).
      sample_weight: optional [B] weights.
    """

    def __init__(
        self, blank: int = 0, pad_id: int = -1, zero_infinity: bool = False,
        reduction: str | None = "sum_over_batch_size", name: str = "ctc_loss",
        dtype: str | keras.DTypePolicy | None = None,
    ) -> None:  # fmt: skip
        super().__init__(pad_id, reduction, name, dtype)
        check_blank(blank, pad_id)
        self.blank = blank
        self.zero_infinity = bool(zero_infinity)

    def _per_utterance(self, y_true: TensorLike, y_pred: Any) -> tf.Tensor:
        frame_mask = getattr(y_pred, "_keras_mask", None)
        logits = tf.convert_to_tensor(y_pred)
        if logits.shape.rank != 3:
            raise ValueError(
                f"y_pred must be logits [B, T, C], got shape {logits.shape}"
            )
        if logits.shape[2] is not None and self.blank >= logits.shape[2]:
            raise ValueError(
                f"blank={self.blank} is not a class of y_pred's C = {logits.shape[2]}"
            )
        symbols, label_lengths = self._labels(
            y_true, tf.shape(logits)[2], tf.shape(logits)[0], excluded=self.blank
        )
        logit_lengths = self._frame_counts(
            tf.shape(logits)[1], tf.shape(symbols)[0], frame_mask
        )
        label_lengths = tf.cast(label_lengths, tf.int32)
        logit_lengths = tf.cast(logit_lengths, tf.int32)
        feasible = ctc_feasible(symbols, label_lengths, logit_lengths)
        # Frames past each length are never read (whatever they hold); the
        # others must hold no NaN or +inf.
        frames = tf.sequence_mask(logit_lengths, tf.shape(logits)[1])
        logits = tf.where(frames[..., tf.newaxis], tf.cast(logits, tf.float32), 0.0)
        with after(finite_or_neg_inf(logits, "y_pred")):
            logits = tf.identity(logits)
        # tf.nn.ctc_loss scores labels of width 0 wrongly: one ignored column.
        symbols = tf.pad(symbols, [[0, 0], [0, 1]])
        losses = tf.nn.ctc_loss(
            labels=tf.cast(symbols, tf.int32),
            logits=logits,
            # Impossible utterances are scored on an empty label (always
            # possible), so that their gradient is finite, then replaced.
            label_length=tf.where(feasible, label_lengths, 0),
            logit_length=logit_lengths,
            logits_time_major=False,
            blank_index=self.blank,
        )
        fill = 0.0 if self.zero_infinity else float("inf")
        return tf.where(feasible, losses, fill)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(blank=self.blank, zero_infinity=self.zero_infinity)
        return config
