# SPDX-License-Identifier: Apache-2.0
"""TdtLoss and FusedTdtLoss: the TDT loss of a joint's two heads' logits or inputs."""

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
from tf_transducer.losses.fused import read_joint_inputs
from tf_transducer.ops import tdt
from tf_transducer.ops import tdt_joint


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


@keras.saving.register_keras_serializable(package="tf_transducer")
class FusedTdtLoss(TdtLoss):
    """The TDT loss of the joiner's inputs: `TdtLoss` without its logits.

    The same loss as `TdtLoss` on the joiner's two heads, computed by
    `tf_transducer.tdt_loss_joint`: neither the token logits
    [B, T, S + 1, C] nor the hidden [B, T, S + 1, J] is ever stored, so the
    memory does not grow with the vocabulary. The gradients reach the
    projections and both output layers.

    Args:
      durations, blank, sigma, omega, pad_id, clamp, fastemit_lambda,
        reduction, name: as `TdtLoss`.
      allow_tf32: as `FusedRnntLoss`.

    Call arguments:
      y_true: int labels [B, S], padded with `pad_id`.
      y_pred: a mapping with "encoder" [B, T, J] and "decoder" [B, S + 1, J]
        (the joiner's projections, as for `FusedRnntLoss`), "joiner" (with
        `output_weights()`, `duration_weights()` -> (kernel [J, K], bias
        [K]) and `activation`: a `TransducerJoiner` with durations), and
        optionally "logit_lengths" int [B]. `tf_transducer.models.Transducer`
        builds it in its `compute_loss`.
      sample_weight: optional [B] weights.
    """

    def __init__(
        self, durations: Sequence[int] = tdt.DEFAULT_DURATIONS, blank: int = 0,
        sigma: float = 0.0, omega: float = 0.0, pad_id: int = -1,
        clamp: float = -1.0, fastemit_lambda: float = 0.0,
        reduction: str | None = "sum_over_batch_size", name: str = "fused_tdt_loss",
        dtype: str | keras.DTypePolicy | None = None, allow_tf32: bool = False,
    ) -> None:  # fmt: skip
        super().__init__(durations, blank, sigma, omega, pad_id, clamp,
                         fastemit_lambda, reduction, name, dtype)  # fmt: skip
        if not isinstance(allow_tf32, bool):
            raise ValueError(f"allow_tf32 must be True or False, got {allow_tf32!r}")
        self.allow_tf32 = allow_tf32

    def _per_utterance(self, y_true: TensorLike, y_pred: Any) -> tf.Tensor:
        joint = read_joint_inputs(y_pred, "FusedTdtLoss")
        if not callable(getattr(joint.joiner, "duration_weights", None)):
            raise ValueError(
                'y_pred["joiner"] must have duration_weights() -> (kernel [J, K], '
                "bias [K]), as a TransducerJoiner with durations; got "
                f"{joint.joiner!r}"
            )
        duration_kernel, duration_bias = (
            tf.cast(x, joint.encoder.dtype) for x in joint.joiner.duration_weights()
        )
        kernel, bias = joint.output
        batch = tf.shape(joint.encoder)[0]
        symbols, label_lengths = self._labels(y_true, tf.shape(kernel)[1], batch)
        symbols = self._fitting_rows(
            symbols, tf.shape(joint.decoder)[1], 'y_pred["decoder"]', per=""
        )
        lengths = y_pred.get("logit_lengths")
        if lengths is None:
            lengths = self._frame_counts(
                tf.shape(joint.encoder)[1], batch, joint.frame_mask,
                'y_pred["encoder"]',
            )  # fmt: skip
        return tdt_joint.tdt_loss_joint(
            joint.encoder, joint.decoder, kernel, bias, duration_kernel,
            duration_bias, symbols, self.blank, self.durations, joint.activation,
            sigma=self.sigma, omega=self.omega, reduction="none",
            logit_lengths=lengths, label_lengths=label_lengths, clamp=self.clamp,
            fastemit_lambda=self.fastemit_lambda, allow_tf32=self.allow_tf32,
        )  # fmt: skip

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["allow_tf32"] = self.allow_tf32
        return config
