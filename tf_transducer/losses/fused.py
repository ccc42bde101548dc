# SPDX-License-Identifier: Apache-2.0
"""FusedRnntLoss: the RNN-T loss of a joint network whose logits never exist."""

from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import NamedTuple

import keras
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer.losses.base import TransducerLoss
from tf_transducer.ops import rnnt_joint


class JointInputs(NamedTuple):
    """What a fused loss reads of y_pred: the joiner's inputs and weights."""

    encoder: tf.Tensor  # [B, T, J]
    decoder: tf.Tensor  # [B, S + 1, J], encoder's dtype
    output: tuple[tf.Tensor, tf.Tensor]  # kernel [J, C], bias [C]
    activation: str
    frame_mask: Any  # the Keras mask of y_pred["encoder"], or None
    joiner: Any


def read_joint_inputs(
    y_pred: Any, loss_name: str, keys: Sequence[str] = ()
) -> JointInputs:
    """y_pred's "encoder", "decoder" and "joiner", checked; errors name them.

    The joiner's output kernel and bias are cast to the projections' dtype
    (its variables are float32 under mixed precision, as Dense would).
    `keys`: further keys y_pred must hold.
    """
    required = ("encoder", "decoder", "joiner", *keys)
    if not isinstance(y_pred, Mapping):
        raise ValueError(
            f"y_pred must be a mapping with keys {required}, got "
            f"{type(y_pred).__name__} (see the {loss_name} docstring)"
        )
    missing = [key for key in required if key not in y_pred]
    if missing:
        raise ValueError(f"y_pred lacks the keys {missing}")
    joiner = y_pred["joiner"]
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
        raise ValueError(f"the joint width J must agree, got {widths} (kernel [J, C])")
    output = (tf.cast(kernel, encoder.dtype), tf.cast(bias, encoder.dtype))
    return JointInputs(encoder, decoder, output, activation, frame_mask, joiner)


@keras.saving.register_keras_serializable(package="tf_transducer")
class FusedRnntLoss(TransducerLoss):
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
        self, blank: int = 0, rnnt_type: str = "regular", delay_penalty: float = 0.0,
        pad_id: int = -1, clamp: float = -1.0, fastemit_lambda: float = 0.0,
        reduction: str | None = "sum_over_batch_size", name: str = "fused_rnnt_loss",
        dtype: str | keras.DTypePolicy | None = None, allow_tf32: bool = False,
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
        if not isinstance(allow_tf32, bool):
            raise ValueError(f"allow_tf32 must be True or False, got {allow_tf32!r}")
        self.allow_tf32 = allow_tf32

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["allow_tf32"] = self.allow_tf32
        return config

    def _per_utterance(self, y_true: TensorLike, y_pred: Any) -> tf.Tensor:
        joint = read_joint_inputs(y_pred, type(self).__name__)
        encoder, decoder, kernel, bias = joint.encoder, joint.decoder, *joint.output
        num_classes = kernel.shape[1]
        if num_classes is not None and self.blank >= num_classes:
            raise ValueError(
                f"blank={self.blank} is not a class of the joiner's C = {num_classes}"
            )
        symbols, label_lengths = self._labels(
            y_true, tf.shape(kernel)[1], tf.shape(encoder)[0]
        )
        symbols = self._fitting_rows(
            symbols, tf.shape(decoder)[1], 'y_pred["decoder"]', per=""
        )
        logit_lengths = y_pred.get("logit_lengths")
        if logit_lengths is None:
            logit_lengths = self._frame_counts(
                tf.shape(encoder)[1],
                tf.shape(symbols)[0],
                joint.frame_mask,
                'y_pred["encoder"]',
            )
        return rnnt_joint.rnnt_loss_joint(
            encoder,
            decoder,
            kernel,
            bias,
            symbols,
            self.blank,
            activation=joint.activation,
            rnnt_type=self.rnnt_type,
            delay_penalty=self.delay_penalty,
            reduction="none",
            logit_lengths=logit_lengths,
            label_lengths=label_lengths,
            clamp=self.clamp,
            fastemit_lambda=self.fastemit_lambda,
            allow_tf32=self.allow_tf32,
        )
