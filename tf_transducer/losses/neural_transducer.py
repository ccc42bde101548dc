# SPDX-License-Identifier: Apache-2.0
"""NeuralTransducerLoss: the Neural Transducer's best-alignment cross entropy."""

from collections.abc import Mapping
from typing import Any

import keras
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import after
from tf_transducer.losses.base import LabelSequenceLoss
from tf_transducer.ops import neural_transducer as nt_ops


@keras.saving.register_keras_serializable(package="tf_transducer")
class NeuralTransducerLoss(LabelSequenceLoss):
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
        self, transducer_max_width: int, e_symbol_index: int, pad_id: int = -1,
        reduction: str | None = "sum_over_batch_size",
        name: str = "neural_transducer_loss",
        dtype: str | keras.DTypePolicy | None = None,
    ) -> None:  # fmt: skip
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
            nt_ops.check_scores(
                logits,
                label_lengths,
                num_blocks,
                'y_pred["logits"]',
                num_blocks_name='y_pred["num_blocks"]',
            )
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
