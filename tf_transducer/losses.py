"""Keras 3 losses over the transducer ops, for `model.compile(loss=...)`."""

import keras
import tensorflow as tf

from tf_transducer.ops import rnnt

_REDUCTIONS = ("sum_over_batch_size", "mean", "sum", "none", None)


@keras.saving.register_keras_serializable(package="tf_transducer")
class RnntLoss(keras.losses.Loss):
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
        respect to the logits to [-clamp, clamp].
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
        self,
        blank=0,
        rnnt_type="regular",
        delay_penalty=0.0,
        pad_id=-1,
        clamp=-1.0,
        fastemit_lambda=0.0,
        reduction="sum_over_batch_size",
        name="rnnt_loss",
        dtype=None,
    ):
        if not isinstance(blank, int) or blank < 0:
            raise ValueError(f"blank must be an int >= 0, got {blank!r}")
        if rnnt_type not in rnnt.RNNT_TYPES:
            raise ValueError(
                f"rnnt_type must be one of {rnnt.RNNT_TYPES}, got {rnnt_type!r}"
            )
        if delay_penalty < 0:
            raise ValueError(f"delay_penalty must be >= 0, got {delay_penalty}")
        if not isinstance(pad_id, int) or (pad_id >= 0 and pad_id == blank):
            raise ValueError(f"pad_id must be an int other than blank, got {pad_id!r}")
        if reduction not in _REDUCTIONS:
            raise ValueError(
                f"reduction must be one of {_REDUCTIONS}, got {reduction!r}"
            )
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.blank = blank
        self.rnnt_type = rnnt_type
        self.delay_penalty = delay_penalty
        self.pad_id = pad_id
        self.clamp = float(clamp)
        if fastemit_lambda < 0:
            raise ValueError(f"fastemit_lambda must be >= 0, got {fastemit_lambda}")
        self.fastemit_lambda = float(fastemit_lambda)

    def __call__(self, y_true, y_pred, sample_weight=None):
        # Keras would apply y_pred's [B, T] frame mask to the [B] losses;
        # here the mask gives the frame counts instead.
        frame_mask = getattr(y_pred, "_keras_mask", None)
        with tf.name_scope(self.name):
            losses = self._per_utterance(y_true, y_pred, frame_mask)
            if sample_weight is not None:
                losses = losses * tf.cast(tf.reshape(sample_weight, [-1]), losses.dtype)
            if self.reduction in ("none", None):
                return losses
            total = tf.reduce_sum(losses)
            if self.reduction == "sum":
                return total
            return total / tf.cast(tf.maximum(tf.size(losses), 1), losses.dtype)

    def call(self, y_true, y_pred):
        """Per-utterance losses [B] (no frame mask: all frames count)."""
        return self._per_utterance(y_true, y_pred, None)

    def _per_utterance(self, y_true, y_pred, frame_mask):
        logits = tf.convert_to_tensor(y_pred)
        labels = tf.cast(tf.convert_to_tensor(y_true), tf.int64)
        if labels.shape.rank != 2:
            raise ValueError(
                f"y_true must be labels [B, S] padded with pad_id={self.pad_id}, "
                f"got shape {labels.shape}"
            )
        is_label = tf.not_equal(labels, self.pad_id)
        label_lengths = tf.reduce_sum(tf.cast(is_label, tf.int64), axis=1)
        symbols = tf.where(is_label, labels, tf.zeros_like(labels))
        if frame_mask is None:
            logit_lengths = tf.fill(
                tf.shape(labels)[:1], tf.shape(logits, out_type=tf.int64)[1]
            )
        else:
            logit_lengths = tf.reduce_sum(tf.cast(frame_mask, tf.int64), axis=1)
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

    def get_config(self):
        config = super().get_config()
        config.update(
            blank=self.blank,
            rnnt_type=self.rnnt_type,
            delay_penalty=self.delay_penalty,
            pad_id=self.pad_id,
            clamp=self.clamp,
            fastemit_lambda=self.fastemit_lambda,
        )
        return config
