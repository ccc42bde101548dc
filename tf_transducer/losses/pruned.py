# SPDX-License-Identifier: Apache-2.0
"""PrunedRnntLoss: k2's simple + pruned RNN-T loss of a joiner's inputs."""

from collections.abc import Mapping
from typing import Any

import keras
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import real_number
from tf_transducer.losses.base import TransducerLoss
from tf_transducer.ops import rnnt
from tf_transducer.ops import rnnt_pruned
from tf_transducer.ops import rnnt_smoothed


@keras.saving.register_keras_serializable(package="tf_transducer")
class PrunedRnntLoss(TransducerLoss):
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
        self, s_range: int = 5, simple_loss_scale: float = 0.5,
        pruned_loss_scale: float = 1.0, lm_only_scale: float = 0.25,
        am_only_scale: float = 0.0, blank: int = 0, rnnt_type: str = "regular",
        delay_penalty: float = 0.0, pad_id: int = -1, clamp: float = -1.0,
        fastemit_lambda: float = 0.0, reduction: str | None = "sum_over_batch_size",
        name: str = "pruned_rnnt_loss", dtype: str | keras.DTypePolicy | None = None,
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
