# SPDX-License-Identifier: Apache-2.0
"""What every loss here shares: padded labels, sample weights, reduction.

`LabelSequenceLoss` is the base of each loss; `TransducerLoss` adds the
RNN-T family's options (blank, rnnt_type, delay_penalty, clamp, FastEmit).
"""

from typing import Any

import keras
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import after
from tf_transducer._checks import clamp_value
from tf_transducer._checks import first_bad
from tf_transducer._checks import real_number
from tf_transducer._checks import require
from tf_transducer.ops import rnnt

REDUCTIONS = ("sum_over_batch_size", "mean", "sum", "none", None)


def check_blank(blank: int, pad_id: int) -> None:
    """ValueError unless blank is an int >= 0 other than pad_id."""
    if not isinstance(blank, int) or isinstance(blank, bool) or blank < 0:
        raise ValueError(f"blank must be an int >= 0, got {blank!r}")
    if pad_id == blank:
        raise ValueError(f"pad_id must differ from blank ({blank}), got {pad_id!r}")


class LabelSequenceLoss(keras.losses.Loss):
    """Shared by the sequence losses: padded labels, sample weights, reduction.

    y_true holds each sequence's labels first, then pad_id up to the batch's
    width (`padded_batch` with padding_values=pad_id); labels may come as
    integral floats (Keras may cast y_true to the model's dtype).
    """

    def __init__(
        self,
        pad_id: int,
        reduction: str | None,
        name: str,
        dtype: str | keras.DTypePolicy | None,
    ) -> None:
        if not isinstance(pad_id, int) or isinstance(pad_id, bool):
            raise ValueError(f"pad_id must be an int, got {pad_id!r}")
        if reduction not in REDUCTIONS:
            raise ValueError(
                f"reduction must be one of {REDUCTIONS}, got {reduction!r}"
            )
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.pad_id = pad_id

    def __call__(
        self,
        y_true: TensorLike,
        y_pred: Any,
        sample_weight: TensorLike | None = None,
    ) -> tf.Tensor:
        with tf.name_scope(self.name):
            losses = self._per_utterance(y_true, y_pred)
            if sample_weight is not None:
                weights = tf.reshape(tf.convert_to_tensor(sample_weight), [-1])
                with after(
                    require(
                        tf.equal(tf.size(weights), tf.size(losses)),
                        "sample_weight must hold one weight per sequence "
                        "(B = {}), got {} weights",
                        tf.size(losses),
                        tf.size(weights),
                    )
                ):
                    losses = losses * tf.cast(weights, losses.dtype)
            if self.reduction in ("none", None):
                return losses
            total = tf.reduce_sum(losses)
            if self.reduction == "sum":
                return total
            mean = total / tf.cast(tf.maximum(tf.size(losses), 1), losses.dtype)
            # As Keras' own losses: each replica's mean over its share of the
            # batch, divided by the replicas (their gradients are summed).
            replicas = tf.distribute.get_strategy().num_replicas_in_sync
            return mean / replicas if replicas > 1 else mean

    def call(self, y_true: TensorLike, y_pred: Any) -> tf.Tensor:
        """Per-utterance losses [B]."""
        return self._per_utterance(y_true, y_pred)

    def _labels(
        self,
        y_true: TensorLike,
        num_classes: TensorLike | None = None,
        batch: TensorLike | None = None,
        excluded: int | None = None,
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """(labels int64 [B, S] with padding set to 0, label_lengths [B]).

        Checks (InvalidArgumentError naming y_true) that every row is labels
        then padding, that labels are integers, in [0, num_classes) and not
        `excluded` (when given), and that there are `batch` rows.
        """
        labels = tf.convert_to_tensor(y_true)
        if labels.shape.rank != 2:
            raise ValueError(
                f"y_true must be labels [B, S] padded with pad_id={self.pad_id}, "
                f"got shape {labels.shape}"
            )
        checks: list[Any] = []
        if labels.dtype.is_floating:
            whole = tf.equal(labels, tf.round(labels))
            value, index = first_bad(~whole, labels)
            checks.append(
                require(
                    tf.reduce_all(whole),
                    "y_true must hold integer labels, got {} at [b, s] = {}",
                    value,
                    index,
                )
            )
        elif not labels.dtype.is_integer:
            raise ValueError(f"y_true must hold integer labels, got {labels.dtype}")
        labels = tf.cast(labels, tf.int64)
        is_label = tf.not_equal(labels, self.pad_id)
        after_padding = is_label[:, 1:] & ~is_label[:, :-1]
        _, index = first_bad(after_padding, labels[:, 1:])
        checks.append(
            require(
                ~tf.reduce_any(after_padding),
                f"y_true must hold each sequence's labels, then pad_id={self.pad_id}"
                " to the end; got a label after the padding at [b, s] = {}",
                index + [[0, 1]],
            )
        )
        if num_classes is not None:
            bad = is_label & ((labels < 0) | (labels >= tf.cast(num_classes, tf.int64)))
            if excluded is not None:
                bad |= is_label & tf.equal(labels, excluded)
            value, index = first_bad(bad, labels)
            extra = "" if excluded is None else f", other than {excluded}"
            checks.append(
                require(
                    ~tf.reduce_any(bad),
                    "y_true labels must lie in [0, C) with C = {}"
                    + extra
                    + f" (padding: pad_id={self.pad_id}); got {{}} at [b, s] = {{}}",
                    num_classes,
                    value,
                    index,
                )
            )
        if batch is not None:
            checks.append(
                require(
                    tf.equal(tf.shape(labels)[0], tf.cast(batch, tf.int32)),
                    "y_true has {} sequences but y_pred has {}",
                    tf.shape(labels)[0],
                    batch,
                )
            )
        with after(*checks):
            label_lengths = tf.reduce_sum(tf.cast(is_label, tf.int64), axis=1)
            return tf.where(is_label, labels, tf.zeros_like(labels)), label_lengths

    @staticmethod
    def _fitting_rows(
        symbols: tf.Tensor, rows: TensorLike, what: str = "y_pred",
        per: str = " per frame",
    ) -> tf.Tensor:  # fmt: skip
        """symbols [B, S], after a check that `what` has S + 1 rows (`rows`)."""
        with after(
            require(
                tf.equal(tf.shape(symbols)[1] + 1, tf.cast(rows, tf.int32)),
                f"{what} must have S + 1 = {{}} rows{per} for y_true's S labels, "
                "got {}",
                tf.shape(symbols)[1] + 1,
                rows,
            )
        ):
            return tf.identity(symbols)

    @staticmethod
    def _frame_counts(
        frames: TensorLike,
        batch: TensorLike,
        frame_mask: TensorLike | None,
        owner: str = "y_pred",
    ) -> tf.Tensor:
        """logit_lengths [B] from a [B, T] frame mask, else all T frames.

        The mask must be a prefix in each row (each utterance's frames, then
        padding): a mask with holes is an InvalidArgumentError naming
        `owner`'s Keras mask, since lengths cannot describe it.
        """
        if frame_mask is None:
            return tf.fill([batch], tf.cast(frames, tf.int64))
        mask = tf.cast(frame_mask, tf.bool)
        counts = tf.reduce_sum(tf.cast(mask, tf.int64), axis=1)
        hole = mask[:, 1:] & ~mask[:, :-1]
        _, index = first_bad(hole, mask[:, 1:])
        with after(
            require(
                ~tf.reduce_any(hole),
                f"{owner}'s Keras mask must mark each utterance's first frames "
                "(a prefix per row, as a masking layer gives); got a masked "
                "frame before an unmasked one at [b, t] = {}",
                index + [[0, 1]],
            )
        ):
            return tf.identity(counts)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(pad_id=self.pad_id)
        return config


class TransducerLoss(LabelSequenceLoss):
    """Shared by the transducer losses: blank, rnnt_type, delay_penalty, clamp.

    Also fastemit_lambda; clamp and fastemit_lambda act on the gradient.
    """

    def __init__(
        self, blank: int, rnnt_type: str, delay_penalty: float, pad_id: int,
        reduction: str | None, name: str, dtype: str | keras.DTypePolicy | None,
        clamp: float = -1.0, fastemit_lambda: float = 0.0,
    ) -> None:  # fmt: skip
        super().__init__(pad_id, reduction, name, dtype)
        check_blank(blank, pad_id)
        if rnnt_type not in rnnt.RNNT_TYPES:
            raise ValueError(
                f"rnnt_type must be one of {rnnt.RNNT_TYPES}, got {rnnt_type!r}"
            )
        self.blank = blank
        self.rnnt_type = rnnt_type
        self.delay_penalty = real_number("delay_penalty", delay_penalty, minimum=0.0)
        self.clamp = clamp_value(clamp)
        self.fastemit_lambda = real_number(
            "fastemit_lambda", fastemit_lambda, minimum=0.0
        )

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            blank=self.blank,
            rnnt_type=self.rnnt_type,
            delay_penalty=self.delay_penalty,
            clamp=self.clamp,
            fastemit_lambda=self.fastemit_lambda,
        )
        return config
