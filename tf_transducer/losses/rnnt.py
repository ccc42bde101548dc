# SPDX-License-Identifier: Apache-2.0
"""RnntLoss: the RNN-T loss of full logits [B, T, U + 1, V]."""

from typing import Any

import keras
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer.losses.base import TransducerLoss
from tf_transducer.ops import rnnt


@keras.saving.register_keras_serializable(package="tf_transducer")
class RnntLoss(TransducerLoss):
    """The RNN-T loss on joiner logits, as a Keras loss (fused C++ op).

    Padding does not change the loss: each utterance is scored on its own
    frames and labels only.

    Args:
      blank: the blank (termination) index, in [0, C).
      rnnt_type: "regular", "modified" or "constrained" (see
        `tf_transducer.rnnt_loss`).
      delay_penalty: float >= 0, rewards early symbols.
      pad_id: the value that pads label sequences after their last label
        (use it as `padding_values` of `tf.data.Dataset.padded_batch`); it
        must not be a class index.
      clamp: if > 0, clamps each element of each utterance's gradient with
        respect to the logits to [-clamp, clamp]; <= 0 (the default) or +inf
        clamps nothing.
      fastemit_lambda: float >= 0, FastEmit regularisation: the gradient
        through symbol steps is scaled by (1 + fastemit_lambda).
      reduction: "sum_over_batch_size" (default) or "mean" (the mean over
        utterances), "sum", or "none" (per-utterance losses [B]).
      name: the loss's name.

    Call arguments:
      y_true: int (or integral float) labels [B, S], padded with `pad_id`.
      y_pred: float logits [B, T, S + 1, C]. If it carries a Keras mask
        [B, T] (the frames of each utterance, as a masking encoder gives),
        frames outside the mask are ignored; without one, all T count.
      sample_weight: optional [B] weights.

    Example:
    ```python
    model.compile(optimizer="adam", loss=tf_transducer.losses.RnntLoss(blank=0))
    model.fit(dataset.padded_batch(8, padding_values=(0.0, -1)))
    ```
    """

    def __init__(
        self, blank: int = 0, rnnt_type: str = "regular", delay_penalty: float = 0.0,
        pad_id: int = -1, clamp: float = -1.0, fastemit_lambda: float = 0.0,
        reduction: str | None = "sum_over_batch_size", name: str = "rnnt_loss",
        dtype: str | keras.DTypePolicy | None = None,
    ) -> None:  # fmt: skip
        super().__init__(
            blank,
            rnnt_type,
            delay_penalty,
            pad_id,
            reduction,
            name,
            dtype,
            clamp,
            fastemit_lambda,
        )

    def _per_utterance(self, y_true: TensorLike, y_pred: Any) -> tf.Tensor:
        # Keras would apply y_pred's [B, T] frame mask to the [B] losses;
        # here the mask gives the frame counts instead.
        frame_mask = getattr(y_pred, "_keras_mask", None)
        logits = tf.convert_to_tensor(y_pred)
        if logits.shape.rank != 4:
            raise ValueError(
                f"y_pred must be joiner logits [B, T, S + 1, C], got shape "
                f"{logits.shape}"
            )
        symbols, label_lengths = self._labels(
            y_true, tf.shape(logits)[3], tf.shape(logits)[0]
        )
        symbols = self._fitting_rows(symbols, tf.shape(logits)[2])
        logit_lengths = self._frame_counts(
            tf.shape(logits)[1], tf.shape(symbols)[0], frame_mask
        )
        return rnnt.rnnt_loss(
            logits,
            symbols,
            self.blank,
            rnnt_type=self.rnnt_type,
            delay_penalty=self.delay_penalty,
            reduction="none",
            logit_lengths=logit_lengths,
            label_lengths=label_lengths,
            clamp=self.clamp,
            fastemit_lambda=self.fastemit_lambda,
        )
