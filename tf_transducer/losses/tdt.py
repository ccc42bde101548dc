# SPDX-License-Identifier: Apache-2.0
"""TdtLoss: the Token-and-Duration Transducer loss of a joint's two heads."""

from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import clamp_value
from tf_transducer._checks import real_number
from tf_transducer.losses.base import LabelSequenceLoss
from tf_transducer.losses.base import check_blank
from tf_transducer.ops import tdt


@keras.saving.register_keras_serializable(package="tf_transducer")
class TdtLoss(LabelSequenceLoss):
    """The TDT loss (`tf_transducer.tdt_loss`) as a Keras loss (fused C++ op).

    The joint predicts a token (blank included) and, normalised apart, how
    many frames it covers; decoding then skips frames. Padding does not
    change the loss.

    Args:
      durations: the frame counts of the duration head (default
        [0, 1, 2, 3, 4]): sorted, distinct, >= 0, with 0 and 1.
      blank: the blank index.
      sigma: float >= 0, logit under-normalisation: subtracted from every
        token log-prob (the paper uses 0.05 for some models; default 0).
      omega: float in [0, 1], the weight of the plain RNN-T loss of the
        token logits mixed in: (1 - omega) * TDT + omega * RNN-T.
      pad_id, clamp, fastemit_lambda, reduction, name: as `RnntLoss`
        (FastEmit scales the gradient through every label step, its token
        and its duration).

    Call arguments:
      y_true: int labels [B, S], padded with `pad_id`.
      y_pred: a mapping with "token_logits" float [B, T, S + 1, C],
        "duration_logits" float [B, T, S + 1, K] and optionally
        "logit_lengths" int [B] (else a Keras mask on "token_logits", else
        all T frames). `tf_transducer.models.Transducer` builds it in its
        `compute_loss` when its joiner has a duration head.
      sample_weight: optional [B] weights.

    Example:
    ```python
    model = Transducer.from_preset(
        "lstm-1m", vocab_size=256, joiner={"durations": [0, 1, 2, 3, 4]})
    model.compile(optimizer="adam", loss=TdtLoss(durations=[0, 1, 2, 3, 4]))
    ```
    """

    def __init__(
        self, durations: Sequence[int] = tdt.DEFAULT_DURATIONS, blank: int = 0,
        sigma: float = 0.0, omega: float = 0.0, pad_id: int = -1,
        clamp: float = -1.0, fastemit_lambda: float = 0.0,
        reduction: str | None = "sum_over_batch_size", name: str = "tdt_loss",
        dtype: str | keras.DTypePolicy | None = None,
    ) -> None:  # fmt: skip
        super().__init__(pad_id, reduction, name, dtype)
        check_blank(blank, pad_id)
        self.durations = tdt.check_durations(durations)
        self.blank = blank
        self.sigma = real_number("sigma", sigma, minimum=0.0)
        self.omega = real_number("omega", omega, minimum=0.0)
        if self.omega > 1:
            raise ValueError(f"omega must lie in [0, 1], got {omega!r}")
        self.clamp = clamp_value(clamp)
        self.fastemit_lambda = real_number(
            "fastemit_lambda", fastemit_lambda, minimum=0.0
        )

    def _per_utterance(self, y_true: TensorLike, y_pred: Any) -> tf.Tensor:
        if not isinstance(y_pred, Mapping) or not {
            "token_logits",
            "duration_logits",
        } <= set(y_pred):
            raise ValueError(
                'y_pred must be a mapping with "token_logits" [B, T, S + 1, C] and '
                '"duration_logits" [B, T, S + 1, K] (and optionally '
                f'"logit_lengths"), got {type(y_pred).__name__}'
            )
        tokens = y_pred["token_logits"]
        frame_mask = getattr(tokens, "_keras_mask", None)
        tokens = tf.convert_to_tensor(tokens)
        if tokens.shape.rank != 4:
            raise ValueError(
                f'y_pred["token_logits"] must have rank 4 [B, T, S + 1, C], got '
                f"shape {tokens.shape}"
            )
        batch = tf.shape(tokens)[0]
        symbols, label_lengths = self._labels(y_true, tf.shape(tokens)[3], batch)
        symbols = self._fitting_rows(symbols, tf.shape(tokens)[2])
        lengths = y_pred.get("logit_lengths")
        if lengths is None:
            lengths = self._frame_counts(tf.shape(tokens)[1], batch, frame_mask)
        return tdt.tdt_loss(
            tokens,
            y_pred["duration_logits"],
            symbols,
            self.blank,
            self.durations,
            sigma=self.sigma,
            omega=self.omega,
            reduction="none",
            logit_lengths=lengths,
            label_lengths=label_lengths,
            clamp=self.clamp,
            fastemit_lambda=self.fastemit_lambda,
        )

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            durations=list(self.durations),
            blank=self.blank,
            sigma=self.sigma,
            omega=self.omega,
            clamp=self.clamp,
            fastemit_lambda=self.fastemit_lambda,
        )
        return config
