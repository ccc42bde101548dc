# SPDX-License-Identifier: Apache-2.0
"""FrameStacking: context windows and frame stacking with subsampling."""

from typing import Any

import keras
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import check_non_negative_int
from tf_transducer._checks import check_positive
from tf_transducer._checks import resolve_lengths
from tf_transducer._checks import with_attributes
from tf_transducer.layers import _dsp
from tf_transducer.layers._checks import ListLengths
from tf_transducer.layers._checks import OutputShape
from tf_transducer.layers._checks import Shape
from tf_transducer.layers._checks import TracedOutputSpec
from tf_transducer.layers._checks import ceil_div


@keras.saving.register_keras_serializable(package="tf_transducer")
class FrameStacking(TracedOutputSpec, ListLengths, keras.layers.Layer):
    """Concatenates each kept frame with its neighbours.

    Output frame j is centred on input frame c = j * stride and is

        concat(x[c - left_context], ..., x[c], ..., x[c + right_context])

    (time-major, [(left + 1 + right) * F]), with zeros for neighbours outside
    the utterance (before 0 or at/after its length: the padding of a batch is
    never read). An utterance of n frames gives ceil(n / stride).

    DeepSpeech's context windows are `FrameStacking(9, 9)`; a transducer's
    "stack 3, keep every 3rd" is `FrameStacking(0, 2, stride=3)`.

    Args:
      left_context, right_context: neighbours on each side, ints >= 0.
      stride: keep every stride-th frame (subsampling), int >= 1.

    Call arguments:
      features: [B, T, F], padded. Values are only copied, never computed
        with: NaN or inf stay where they are (unlike the feature layers,
        which refuse them) and integer features stay integers.
      lengths: optional int [B] frames (default: T).

    Returns:
      (stacked [B, ceil(T / stride), (left + 1 + right) * F], lengths [B]).
    """

    def __init__(
        self,
        left_context: int = 0,
        right_context: int = 0,
        stride: int = 1,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        check_non_negative_int("left_context", left_context)
        check_non_negative_int("right_context", right_context)
        check_positive("stride", stride, int)
        self.left_context = left_context
        self.right_context = right_context
        self.stride = stride

    def call(
        self, features: tf.Tensor, lengths: TensorLike | None = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        if features.shape.rank != 3:
            raise ValueError(f"features must be [B, T, F], got shape {features.shape}")
        lengths = resolve_lengths(features, lengths)
        x = _dsp.zero_after(features, lengths)
        x = tf.pad(x, [[0, 0], [self.left_context, self.right_context], [0, 0]])
        width = self.left_context + 1 + self.right_context
        windows = tf.signal.frame(x, width, self.stride, axis=1)  # [B, T', width, F]
        shape = tf.shape(windows)
        stacked = tf.reshape(windows, [shape[0], shape[1], width * shape[3]])
        if features.shape[-1] is not None:
            stacked.set_shape([None, None, width * features.shape[-1]])
        out_lengths = (lengths + self.stride - 1) // self.stride
        return _dsp.zero_after(stacked, out_lengths), out_lengths

    def compute_output_shape(
        self, input_shape: Shape, lengths_shape: Shape | None = None
    ) -> tuple[OutputShape, OutputShape]:
        # `input_shape`: Keras's name for the features' shape when it builds.
        batch, frames, size = input_shape
        width = self.left_context + 1 + self.right_context
        stacked = None if size is None else width * size
        return (batch, ceil_div(frames, self.stride), stacked), (batch,)

    def get_config(self) -> dict[str, Any]:
        return with_attributes(
            super().get_config(), self, "left_context", "right_context", "stride"
        )
