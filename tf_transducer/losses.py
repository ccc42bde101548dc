# SPDX-License-Identifier: Apache-2.0
"""Keras 3 losses over the transducer ops, for `model.compile(loss=...)`."""

from collections.abc import Mapping
from typing import Any

import keras
import tensorflow as tf

from tf_transducer.ops import neural_transducer as nt_ops
from tf_transducer.ops import rnnt, rnnt_joint, rnnt_pruned, rnnt_smoothed
from tf_transducer.ops._validation import (
    TensorLike,
    after,
    clamp_value,
    finite_or_neg_inf,
    first_bad,
    real_number,
    require,
)

__all__ = [
    "CtcLoss",
    "FusedRnntLoss",
    "NeuralTransducerLoss",
    "PrunedRnntLoss",
    "RecognitionLatticeLoss",
    "RnntLoss",
]

_REDUCTIONS = ("sum_over_batch_size", "mean", "sum", "none", None)


def _check_blank(blank: int, pad_id: int) -> None:
    if not isinstance(blank, int) or isinstance(blank, bool) or blank < 0:
        raise ValueError(f"blank must be an int >= 0, got {blank!r}")
    if pad_id == blank:
        raise ValueError(f"pad_id must differ from blank ({blank}), got {pad_id!r}")


class _LabelSequenceLoss(keras.losses.Loss):
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
        if reduction not in _REDUCTIONS:
            raise ValueError(
                f"reduction must be one of {_REDUCTIONS}, got {reduction!r}"
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


class _TransducerLoss(_LabelSequenceLoss):
    """Shared by the transducer losses: blank, rnnt_type, delay_penalty, clamp.

    Also fastemit_lambda; clamp and fastemit_lambda act on the gradient.
    """

    def __init__(
        self,
        blank: int,
        rnnt_type: str,
        delay_penalty: float,
        pad_id: int,
        reduction: str | None,
        name: str,
        dtype: str | keras.DTypePolicy | None,
        clamp: float = -1.0,
        fastemit_lambda: float = 0.0,
    ) -> None:
        super().__init__(pad_id, reduction, name, dtype)
        _check_blank(blank, pad_id)
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
class CtcLoss(_LabelSequenceLoss):
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
        self,
        blank: int = 0,
        pad_id: int = -1,
        zero_infinity: bool = False,
        reduction: str | None = "sum_over_batch_size",
        name: str = "ctc_loss",
        dtype: str | keras.DTypePolicy | None = None,
    ) -> None:
        super().__init__(pad_id, reduction, name, dtype)
        _check_blank(blank, pad_id)
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


@keras.saving.register_keras_serializable(package="tf_transducer")
class RnntLoss(_TransducerLoss):
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
        self,
        blank: int = 0,
        rnnt_type: str = "regular",
        delay_penalty: float = 0.0,
        pad_id: int = -1,
        clamp: float = -1.0,
        fastemit_lambda: float = 0.0,
        reduction: str | None = "sum_over_batch_size",
        name: str = "rnnt_loss",
        dtype: str | keras.DTypePolicy | None = None,
    ) -> None:
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
        with after(
            require(
                tf.equal(tf.shape(symbols)[1] + 1, tf.shape(logits)[2]),
                "y_pred must have S + 1 = {} rows per frame for y_true's S "
                "labels, got {}",
                tf.shape(symbols)[1] + 1,
                tf.shape(logits)[2],
            )
        ):
            symbols = tf.identity(symbols)
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


@keras.saving.register_keras_serializable(package="tf_transducer")
class PrunedRnntLoss(_TransducerLoss):
    """The pruned RNN-T recipe as one Keras loss (k2 / icefall's training loss).

    Per utterance:

        simple_loss_scale * simple + pruned_loss_scale * pruned

    where `simple` is the RNN-T loss of the additive joiner
    log_softmax(am[t] + lm[s]) (smoothed with LM-only / AM-only terms when
    `lm_only_scale` or `am_only_scale` is nonzero, see
    `tf_transducer.rnnt_loss_smoothed`), whose step occupations choose
    `s_range` symbols per frame (`get_rnnt_prune_ranges`); the joiner is then
    run only there and `pruned` is `rnnt_loss_pruned` on its logits. The joiner
    costs O(B * T * s_range * C) instead of O(B * T * (S + 1) * C).

    Padding does not change the loss.

    Args:
      s_range: symbols kept per frame (>= 2 for "regular", >= 1 otherwise).
      simple_loss_scale: weight of the simple loss.
      pruned_loss_scale: weight of the pruned loss.
      lm_only_scale, am_only_scale: smoothing of the simple loss (icefall's
        defaults: 0.25 and 0.0); both 0 gives `rnnt_loss_simple`.
      clamp, fastemit_lambda: as `RnntLoss`, for the pruned loss (the one on
        the joiner's logits).
      blank, rnnt_type, delay_penalty, pad_id, reduction, name: as `RnntLoss`.

    Call arguments:
      y_true: int labels [B, S], padded with `pad_id`.
      y_pred: a mapping with
        "am": float [B, T, C], the encoder's simple projection;
        "lm": float [B, S + 1, C], the prediction network's simple projection;
        "encoder": float [B, T, J], the encoder output projected for the joiner;
        "decoder": float [B, S + 1, J], the same for the prediction network;
        "joiner": a callable (encoder [B, T, 1, J], decoder [B, T, s_range, J])
          -> logits [B, T, s_range, C] that broadcasts the encoder over the
          s_range rows, e.g. the model's joiner layer (add, tanh, output
          projection; the same layer gives full logits from
          (encoder[:, :, None], decoder[:, None]));
        "logit_lengths": optional int [B], frames of each utterance (else a
          Keras mask on "encoder", else all T).
      sample_weight: optional [B] weights.

    A Keras 3 model hands a mapping like this to its loss from
    `compute_loss` (Keras applies a loss per output otherwise):

    ```python
    class MyTransducer(keras.Model):
        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                         training=True):
            return self.loss(y, dict(y_pred, joiner=self.joiner), sample_weight)

    model.compile(optimizer="adam", loss=PrunedRnntLoss(s_range=5))
    ```

    The joiner is not part of the config: it belongs to the model.
    """

    _KEYS = ("am", "lm", "encoder", "decoder", "joiner")

    def __init__(
        self,
        s_range: int = 5,
        simple_loss_scale: float = 0.5,
        pruned_loss_scale: float = 1.0,
        lm_only_scale: float = 0.25,
        am_only_scale: float = 0.0,
        blank: int = 0,
        rnnt_type: str = "regular",
        delay_penalty: float = 0.0,
        pad_id: int = -1,
        clamp: float = -1.0,
        fastemit_lambda: float = 0.0,
        reduction: str | None = "sum_over_batch_size",
        name: str = "pruned_rnnt_loss",
        dtype: str | keras.DTypePolicy | None = None,
    ) -> None:
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
        least = 2 if rnnt_type == "regular" else 1
        if not isinstance(s_range, int) or s_range < least:
            raise ValueError(
                f"s_range must be an int >= {least} for rnnt_type={rnnt_type!r}, "
                f"got {s_range!r}"
            )
        self.s_range = s_range
        self.simple_loss_scale = real_number(
            "simple_loss_scale", simple_loss_scale, minimum=0.0
        )
        self.pruned_loss_scale = real_number(
            "pruned_loss_scale", pruned_loss_scale, minimum=0.0
        )
        self.lm_only_scale = real_number("lm_only_scale", lm_only_scale, minimum=0.0)
        self.am_only_scale = real_number("am_only_scale", am_only_scale, minimum=0.0)
        if self.lm_only_scale + self.am_only_scale >= 1:
            raise ValueError(
                "lm_only_scale + am_only_scale must be < 1, got "
                f"{lm_only_scale} + {am_only_scale}"
            )

    def components(
        self, y_true: TensorLike, y_pred: Mapping[str, Any]
    ) -> dict[str, tf.Tensor]:
        """{"simple": [B], "pruned": [B]}: the two unweighted losses."""
        if not isinstance(y_pred, Mapping):
            raise ValueError(
                f"y_pred must be a mapping with keys {self._KEYS}, got "
                f"{type(y_pred).__name__} (see the PrunedRnntLoss docstring)"
            )
        missing = [key for key in self._KEYS if key not in y_pred]
        if missing:
            raise ValueError(f"y_pred lacks the keys {missing}")
        joiner = y_pred["joiner"]
        if not callable(joiner):
            raise ValueError(f'y_pred["joiner"] must be callable, got {joiner!r}')
        am = tf.convert_to_tensor(y_pred["am"], name="am")
        lm = tf.convert_to_tensor(y_pred["lm"], name="lm")
        encoder = y_pred["encoder"]
        frame_mask = getattr(encoder, "_keras_mask", None)
        encoder = tf.convert_to_tensor(encoder, name="encoder")
        decoder = tf.convert_to_tensor(y_pred["decoder"], name="decoder")
        if am.shape.rank != 3:
            raise ValueError(f'y_pred["am"] must be [B, T, C], got shape {am.shape}')
        symbols, label_lengths = self._labels(y_true, tf.shape(am)[2], tf.shape(am)[0])
        logit_lengths = y_pred.get("logit_lengths")
        if logit_lengths is None:
            logit_lengths = self._frame_counts(
                tf.shape(am)[1], tf.shape(symbols)[0], frame_mask, 'y_pred["encoder"]'
            )
        boundary = rnnt.boundary_from_lengths(
            logit_lengths, label_lengths, tf.shape(am)[1], tf.shape(symbols)[1]
        )
        options = dict(
            termination_symbol=self.blank,
            boundary=boundary,
            rnnt_type=self.rnnt_type,
            delay_penalty=self.delay_penalty,
            reduction="none",
        )
        if self.lm_only_scale or self.am_only_scale:
            simple, (px_grad, py_grad) = rnnt_smoothed.rnnt_loss_smoothed(
                lm,
                am,
                symbols,
                lm_only_scale=self.lm_only_scale,
                am_only_scale=self.am_only_scale,
                return_grad=True,
                **options,
            )
        else:
            simple, (px_grad, py_grad) = rnnt.rnnt_loss_simple(
                lm, am, symbols, return_grad=True, **options
            )
        ranges = rnnt_pruned.get_rnnt_prune_ranges(
            px_grad, py_grad, boundary, self.s_range
        )
        # do_rnnt_pruning's decoder half; the encoder is broadcast over the
        # s_range rows rather than copied.
        decoder_pruned = tf.gather(decoder, ranges, axis=1, batch_dims=1)
        logits = tf.convert_to_tensor(
            joiner(encoder[:, :, tf.newaxis, :], decoder_pruned)
        )
        pruned = rnnt_pruned.rnnt_loss_pruned(
            logits,
            symbols,
            ranges,
            clamp=self.clamp,
            fastemit_lambda=self.fastemit_lambda,
            **options,
        )
        return {"simple": simple, "pruned": tf.cast(pruned, simple.dtype)}

    def _per_utterance(self, y_true: TensorLike, y_pred: Any) -> tf.Tensor:
        parts = self.components(y_true, y_pred)
        return (
            self.simple_loss_scale * parts["simple"]
            + self.pruned_loss_scale * parts["pruned"]
        )

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            s_range=self.s_range,
            simple_loss_scale=self.simple_loss_scale,
            pruned_loss_scale=self.pruned_loss_scale,
            lm_only_scale=self.lm_only_scale,
            am_only_scale=self.am_only_scale,
        )
        return config


@keras.saving.register_keras_serializable(package="tf_transducer")
class FusedRnntLoss(_TransducerLoss):
    """The RNN-T loss of the joiner's inputs: the full loss without its logits.

    The same loss as `RnntLoss` on the joiner's full logits
    act(encoder[t] + decoder[s]) @ kernel + bias, computed by
    `tf_transducer.ops.rnnt_joint.rnnt_loss_joint`, which forms the logits a
    tile at a time and never stores the [B, T, S + 1, C] logits or the
    [B, T, S + 1, J] hidden activations, nor their gradients: memory that
    does not grow with the vocabulary. The gradients reach the projections
    and the joiner's output kernel and bias.

    Padding does not change the loss.

    Args:
      blank, rnnt_type, delay_penalty, pad_id, clamp, fastemit_lambda,
        reduction, name: as `RnntLoss`.
      allow_tf32: on a GPU, run float32 inputs' matrix products on tensor
        cores in TF32 (as torch's `allow_tf32`; off: exact float32).
        float16 and bfloat16 inputs always use tensor cores.

    Call arguments:
      y_true: int labels [B, S], padded with `pad_id`.
      y_pred: a mapping with
        "encoder": float [B, T, J], the encoder output projected for the
          joiner (`TransducerJoiner.project_encoder`);
        "decoder": float [B, S + 1, J], the prediction network's output
          projected likewise (`project_decoder`);
        "joiner": the joiner whose output layer and activation the loss
          uses: an object with `output_weights()` -> (kernel [J, C], bias
          [C]) and `activation` ("tanh", "relu" or "identity"), e.g. a
          `TransducerJoiner`;
        "logit_lengths": optional int [B], frames of each utterance (else a
          Keras mask on "encoder", else all T).
      sample_weight: optional [B] weights.

    Under a mixed-precision policy the kernel and bias are cast to the
    projections' dtype; the loss is computed in float32 either way.

    `tf_transducer.models.Transducer` builds this mapping in its
    `compute_loss`; a model of your own does as for `PrunedRnntLoss`:

    ```python
    class MyTransducer(keras.Model):
        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                         training=True):
            return self.loss(y, dict(y_pred, joiner=self.joiner), sample_weight)

    model.compile(optimizer="adam", loss=FusedRnntLoss())
    ```

    The joiner is not part of the config: it belongs to the model.
    """

    _KEYS = ("encoder", "decoder", "joiner")

    def __init__(
        self,
        blank: int = 0,
        rnnt_type: str = "regular",
        delay_penalty: float = 0.0,
        pad_id: int = -1,
        clamp: float = -1.0,
        fastemit_lambda: float = 0.0,
        reduction: str | None = "sum_over_batch_size",
        name: str = "fused_rnnt_loss",
        dtype: str | keras.DTypePolicy | None = None,
        allow_tf32: bool = False,
    ) -> None:
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
        if not isinstance(allow_tf32, bool):
            raise ValueError(f"allow_tf32 must be True or False, got {allow_tf32!r}")
        self.allow_tf32 = allow_tf32

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["allow_tf32"] = self.allow_tf32
        return config

    def _joiner_parameters(self, joiner: Any) -> tuple[Any, Any, str]:
        """(kernel [J, C], bias [C], activation) of y_pred["joiner"]."""
        if not callable(getattr(joiner, "output_weights", None)):
            raise ValueError(
                'y_pred["joiner"] must have output_weights() -> (kernel [J, C], '
                f"bias [C]) and an activation, as TransducerJoiner; got {joiner!r}"
            )
        activation = getattr(joiner, "activation", None)
        if activation not in rnnt_joint.ACTIVATIONS:
            raise ValueError(
                f'y_pred["joiner"].activation must be one of '
                f"{rnnt_joint.ACTIVATIONS}, got {activation!r}"
            )
        kernel, bias = joiner.output_weights()
        return kernel, bias, activation

    def _per_utterance(self, y_true: TensorLike, y_pred: Any) -> tf.Tensor:
        if not isinstance(y_pred, Mapping):
            raise ValueError(
                f"y_pred must be a mapping with keys {self._KEYS}, got "
                f"{type(y_pred).__name__} (see the FusedRnntLoss docstring)"
            )
        missing = [key for key in self._KEYS if key not in y_pred]
        if missing:
            raise ValueError(f"y_pred lacks the keys {missing}")
        kernel, bias, activation = self._joiner_parameters(y_pred["joiner"])
        encoder = y_pred["encoder"]
        frame_mask = getattr(encoder, "_keras_mask", None)
        encoder = tf.convert_to_tensor(encoder, name="encoder")
        decoder = tf.convert_to_tensor(y_pred["decoder"], name="decoder")
        for key, x in (("encoder", encoder), ("decoder", decoder)):
            if x.shape.rank != 3 or not x.dtype.is_floating:
                rows = "T" if key == "encoder" else "S + 1"
                raise ValueError(
                    f'y_pred["{key}"] must be float [B, {rows}, J], got '
                    f"{x.dtype.name} of shape {x.shape}"
                )
        if decoder.dtype != encoder.dtype:
            raise ValueError(
                f'y_pred["decoder"] must have the dtype of y_pred["encoder"] '
                f"({encoder.dtype.name}), got {decoder.dtype.name}"
            )
        widths = {
            'y_pred["encoder"]': encoder.shape[2],
            'y_pred["decoder"]': decoder.shape[2],
            "the joiner's output kernel": kernel.shape[0],
        }
        if len({w for w in widths.values() if w is not None}) > 1:
            raise ValueError(
                f"the joint width J must agree, got {widths} (kernel [J, C])"
            )
        # The output layer's variables are float32 under mixed precision:
        # cast as Dense would, to the projections' dtype.
        kernel = tf.cast(kernel, encoder.dtype)
        bias = tf.cast(bias, encoder.dtype)
        num_classes = kernel.shape[1]
        if num_classes is not None and self.blank >= num_classes:
            raise ValueError(
                f"blank={self.blank} is not a class of the joiner's C = {num_classes}"
            )
        symbols, label_lengths = self._labels(
            y_true, tf.shape(kernel)[1], tf.shape(encoder)[0]
        )
        with after(
            require(
                tf.equal(tf.shape(symbols)[1] + 1, tf.shape(decoder)[1]),
                'y_pred["decoder"] must have S + 1 = {} rows for y_true\'s S '
                "labels, got {}",
                tf.shape(symbols)[1] + 1,
                tf.shape(decoder)[1],
            )
        ):
            symbols = tf.identity(symbols)
        logit_lengths = y_pred.get("logit_lengths")
        if logit_lengths is None:
            logit_lengths = self._frame_counts(
                tf.shape(encoder)[1],
                tf.shape(symbols)[0],
                frame_mask,
                'y_pred["encoder"]',
            )
        return rnnt_joint.rnnt_loss_joint(
            encoder,
            decoder,
            kernel,
            bias,
            symbols,
            self.blank,
            activation=activation,
            rnnt_type=self.rnnt_type,
            delay_penalty=self.delay_penalty,
            reduction="none",
            logit_lengths=logit_lengths,
            label_lengths=label_lengths,
            clamp=self.clamp,
            fastemit_lambda=self.fastemit_lambda,
            allow_tf32=self.allow_tf32,
        )


@keras.saving.register_keras_serializable(package="tf_transducer")
class RecognitionLatticeLoss(_LabelSequenceLoss):
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


@keras.saving.register_keras_serializable(package="tf_transducer")
class NeuralTransducerLoss(_LabelSequenceLoss):
    """The Neural Transducer's loss: cross entropy along the best alignment.

    For each sequence the best alignment of its labels to its blocks (how
    many labels each block emits before <e>) is found by an exact, batched
    dynamic programme over (block, labels emitted so far) on the model's own
    distributions (`tf_transducer.ops.neural_transducer`); the loss is the
    cross entropy of the aligned outputs, <e> included, i.e. minus the best
    alignment's log-probability. The search is deterministic and gets no
    gradient.

    A sequence whose labels cannot fit, U > (W - 1) x blocks, has no
    alignment: it is given weight 0 (its loss is 0, never NaN) and counted
    by `aligned(...)["feasible"]`; make the blocks smaller or W larger.

    Args:
      transducer_max_width: W, outputs per block including <e>.
      e_symbol_index: the id of <e>.
      pad_id: padding of y_true.

    Call: y_true int [B, U] labels padded with pad_id; y_pred {"logits":
    [B, NB, U + 1, W, n_out], "num_blocks": [B]}, the `NeuralTransducer`
    layer's output on the same labels.
    """

    def __init__(
        self,
        transducer_max_width: int,
        e_symbol_index: int,
        pad_id: int = -1,
        reduction: str | None = "sum_over_batch_size",
        name: str = "neural_transducer_loss",
        dtype: str | keras.DTypePolicy | None = None,
    ) -> None:
        super().__init__(pad_id, reduction, name, dtype)
        if not isinstance(e_symbol_index, int) or e_symbol_index < 0:
            raise ValueError(
                f"e_symbol_index must be an int >= 0, got {e_symbol_index!r}"
            )
        if pad_id == e_symbol_index:
            raise ValueError(
                f"pad_id must differ from e_symbol_index ({e_symbol_index})"
            )
        if not isinstance(transducer_max_width, int) or transducer_max_width < 1:
            raise ValueError(
                "transducer_max_width must be an int >= 1, got "
                f"{transducer_max_width!r}"
            )
        self.transducer_max_width = transducer_max_width
        self.e_symbol_index = e_symbol_index

    def aligned(
        self, y_true: TensorLike, y_pred: Mapping[str, Any]
    ) -> dict[str, tf.Tensor]:
        """The best alignment of y_true to y_pred's blocks, as a dict of tensors.

        {"log_probs" [B, NB, W] of the aligned outputs, "targets" [B, NB, W],
        "positions" [B, NB, W] (labels before each output), "mask" [B, NB, W],
        "counts" [B, NB], "feasible" [B]}.

        A y_pred that already holds it under "aligned" (from an earlier
        call on the same y_true and logits) is not searched again.
        """
        if isinstance(y_pred, Mapping) and "aligned" in y_pred:
            return y_pred["aligned"]
        if not isinstance(y_pred, Mapping) or "logits" not in y_pred:
            raise ValueError(
                'y_pred must be a mapping with "logits" [B, NB, U + 1, W, n_out] and '
                '"num_blocks" [B] (the NeuralTransducer layer output), got '
                f"{y_pred!r:.200}"
            )
        logits = tf.convert_to_tensor(y_pred["logits"])
        if logits.shape.rank != 5:
            raise ValueError(
                'y_pred["logits"] must be [B, NB, U + 1, W, n_out], got shape '
                f"{logits.shape}"
            )
        labels, label_lengths = self._labels(
            y_true,
            tf.shape(logits)[4],
            tf.shape(logits)[0],
            excluded=self.e_symbol_index,
        )
        labels = tf.cast(labels, tf.int32)
        if None not in (logits.shape[2], labels.shape[1]) and (
            logits.shape[2] != labels.shape[1] + 1
        ):
            raise ValueError(
                f'y_pred["logits"] has {logits.shape[2]} label positions; y_true has '
                f"{labels.shape[1]} labels, so it must have {labels.shape[1] + 1}"
            )
        num_blocks = y_pred.get("num_blocks")
        if num_blocks is None:
            num_blocks = tf.fill(tf.shape(logits)[:1], tf.shape(logits)[1])
        with after(
            nt_ops.check_scores(logits, label_lengths, num_blocks, 'y_pred["logits"]')
        ):
            logits = tf.identity(logits)
        log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)
        W, e = self.transducer_max_width, self.e_symbol_index
        counts, score = nt_ops.best_block_alignment(
            tf.stop_gradient(log_probs), labels, label_lengths, num_blocks, W, e
        )
        targets, positions, mask = nt_ops.aligned_targets(
            counts, labels, num_blocks, W, e
        )
        feasible = tf.math.is_finite(score)
        mask = mask & feasible[:, None, None]
        picked = nt_ops.aligned_log_probs(log_probs, positions, targets)
        return dict(
            log_probs=picked,
            targets=targets,
            positions=positions,
            mask=mask,
            counts=counts,
            feasible=feasible,
        )

    def _per_utterance(self, y_true: TensorLike, y_pred: Any) -> tf.Tensor:
        out = self.aligned(y_true, y_pred)
        return -tf.reduce_sum(tf.where(out["mask"], out["log_probs"], 0.0), axis=[1, 2])

    def errors(
        self, y_true: TensorLike, y_pred: Mapping[str, Any]
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """Frame errors: (edit distances [B], aligned outputs [B]).

        The Neural Transducer's frame error: the distances between the argmax
        outputs and the aligned targets (<e> included), at the aligned outputs.
        """
        out = self.aligned(y_true, y_pred)
        rows = nt_ops.aligned_rows(
            tf.convert_to_tensor(y_pred["logits"]), out["positions"]
        )
        guess = tf.cast(tf.argmax(rows, axis=-1), tf.int32)
        batch = tf.shape(guess)[0]
        mask = tf.reshape(out["mask"], [batch, -1])
        hyp, count = nt_ops.left_aligned(tf.reshape(guess, [batch, -1]), mask)
        ref, _ = nt_ops.left_aligned(tf.reshape(out["targets"], [batch, -1]), mask)
        distance = nt_ops.edit_distance(hyp, count, ref, count)
        return distance, tf.cast(count, tf.float32)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            transducer_max_width=self.transducer_max_width,
            e_symbol_index=self.e_symbol_index,
        )
        return config
