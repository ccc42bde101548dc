# SPDX-License-Identifier: Apache-2.0
"""ConvSubsampling: stride-2 Conv2Ds over (time, freq), causal in time."""

from typing import Any

import keras
import tensorflow as tf

from tf_transducer._checks import after
from tf_transducer._checks import check_positive
from tf_transducer._checks import float_values
from tf_transducer._checks import require
from tf_transducer._checks import resolve_lengths
from tf_transducer._checks import with_attributes
from tf_transducer.layers._checks import ListLengths
from tf_transducer.layers._checks import OutputShape
from tf_transducer.layers._checks import Shape
from tf_transducer.layers._checks import TracedOutputSpec
from tf_transducer.layers._checks import ceil_div

FACTORS = (2, 4, 8)


def check_width(name: str, x: tf.Tensor, width: int | None) -> tf.Tensor:
    """x [B, T, width], its width static from here on (checked when unknown)."""
    if x.shape.rank != 3 or x.shape[-1] not in (None, width):
        raise ValueError(f"{name} must be [B, T, {width}], got shape {x.shape}")
    check = require(
        tf.equal(tf.shape(x)[2], width),
        f"{name} must be [B, T, {width}], got {{}} features (F)",
        tf.shape(x)[2],
    )
    with after(check):
        x = tf.identity(x)
    x.set_shape([None, None, width])
    return x


@keras.saving.register_keras_serializable(package="tf_transducer")
class ConvSubsampling(TracedOutputSpec, ListLengths, keras.layers.Layer):
    """Subsamples features in time by `factor` (2, 4 or 8), causally.

    log2(factor) Conv2Ds (kernel 3, stride 2, ReLU) over (time, freq), then
    a Dense to d_model. In frequency each conv pads one bin on both sides
    (F -> ceil(F / 2)); in time the utterance is preceded by factor - 1 zero
    frames and every conv is "valid", so output frame j reads input frames
    factor * j - (factor - 1) .. factor * j + factor - 1 only (never later
    ones): it is complete once frame factor * (j + 1) - 1 has arrived. The
    padding (frames at and after each length) is set to 0 before the convs,
    so it is never read; outputs past the new lengths are 0.

    Streaming (`step`): chunks of factor * n frames, with a cache of the
    last factor - 1 input frames ([B, factor - 1, F], zeros at the start).
    Chunk by chunk it equals the offline call, the last chunk padded with
    anything (its `lengths` given) or with zeros.

    Args:
      d_model: output width.
      factor: time subsampling, 2, 4 or 8.
      channels: the convs' filters (default d_model).

    Call arguments:
      features: float [B, T, F] (F static); lengths: optional int [B].

    Returns:
      (subsampled [B, ceil(T / factor), d_model], lengths ceil(lengths /
      factor) [B]).
    """

    def __init__(
        self, d_model: int = 144, factor: int = 4, channels: int | None = None,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(**kwargs)
        check_positive("d_model", d_model, int)
        if factor not in FACTORS or isinstance(factor, bool):
            raise ValueError(f"factor must be one of {list(FACTORS)}, got {factor!r}")
        if channels is not None:
            check_positive("channels", channels, int)
        self.d_model, self.factor, self.channels = d_model, factor, channels
        filters = channels or d_model
        self.convs = [
            keras.layers.Conv2D(
                filters,
                3,
                strides=2,
                padding="valid",
                activation="relu",
                name=f"conv_{i}",
            )  # fmt: skip
            for i in range(factor.bit_length() - 1)
        ]
        self.dense = keras.layers.Dense(d_model, name="dense")
        self.input_dim: int | None = None

    def build(self, features_shape: Shape, lengths_shape: Shape | None = None) -> None:
        self.input_dim = features_shape[-1]
        if self.input_dim is None:
            raise ValueError(
                f"features must have a static last size F, got shape {features_shape}"
            )
        freq, width = self.input_dim, 1
        for conv in self.convs:
            conv.build([None, None, freq + 2, width])
            freq, width = -(-freq // 2), conv.filters
        self.out_width = freq * width
        self.dense.build((None, None, self.out_width))
        self.built = True

    def _subsample(self, x):
        """Valid convs over x [B, T, F] (the left context included) + Dense."""
        x = tf.expand_dims(x, -1)
        for conv in self.convs:
            x = conv(tf.pad(x, [[0, 0], [0, 0], [1, 1], [0, 0]]))
        shape = tf.shape(x)
        x = tf.reshape(x, [shape[0], shape[1], self.out_width])
        return self.dense(x)

    def call(self, features: Any, lengths: Any = None) -> tuple[tf.Tensor, tf.Tensor]:
        features = check_width("features", float_values(features, "features"),
                               self.input_dim)  # fmt: skip
        lengths = resolve_lengths(features, lengths)
        frames = tf.shape(features)[1]
        mask = tf.sequence_mask(lengths, frames)[..., None]
        x = tf.cast(features, self.compute_dtype)
        x = tf.where(mask, x, tf.zeros([], x.dtype))
        out_frames = (frames + self.factor - 1) // self.factor
        # Zeros: factor - 1 frames before, up to a whole output frame after
        # (at least one, so that the convs have input).
        right = tf.maximum(out_frames, 1) * self.factor - frames
        x = tf.pad(x, [[0, 0], [self.factor - 1, right], [0, 0]])
        x = self._subsample(x)[:, :out_frames]
        out_lengths = (lengths + self.factor - 1) // self.factor
        valid = tf.sequence_mask(out_lengths, out_frames)[..., None]
        return tf.where(valid, x, tf.zeros([], x.dtype)), out_lengths

    def compute_output_shape(
        self, features_shape: Shape, lengths_shape: Shape | None = None
    ) -> tuple[OutputShape, OutputShape]:
        batch, frames = features_shape[0], features_shape[1]
        return (batch, ceil_div(frames, self.factor), self.d_model), (batch,)

    def initial_state(self, batch: int) -> tf.Tensor:
        """The zero cache: [batch, factor - 1, F] (F known once built)."""
        if self.input_dim is None:
            raise ValueError(
                "initial_state needs the feature width: call or build the layer first"
            )
        return tf.zeros([batch, self.factor - 1, self.input_dim], self.compute_dtype)

    def step(
        self, features: Any, cache: Any, lengths: Any = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """Subsamples one streaming chunk: (subsampled [B, n, d_model], new cache).

        Args:
          features: float [B, factor * n, F], n static.
          cache: [B, factor - 1, F], the frames before the chunk
            (`initial_state` at the start).
          lengths: optional int [B], the valid frames of the chunk (the last
            chunk of an utterance); the others are read as zeros.

        Returns:
          (subsampled [B, n, d_model], 0 past ceil(lengths / factor); the
          new cache [B, factor - 1, F]).
        """
        features = float_values(features, "features")
        if self.input_dim is None:
            self.build(features.shape)
        features = check_width("features", features, self.input_dim)
        size = features.shape[1]
        if size is None or size % self.factor or size == 0:
            raise ValueError(
                f"features (a streaming chunk) must have a static positive "
                f"multiple of factor={self.factor} frames, got {size}"
            )
        cache = tf.convert_to_tensor(cache)
        want = [self.factor - 1, self.input_dim]
        if cache.shape.rank != 3 or cache.shape[1:].as_list() != want:
            raise ValueError(
                f"cache must be [B, {want[0]}, {want[1]}], got {cache.shape}"
            )
        dtype = self.compute_dtype
        x = tf.cast(features, dtype)
        valid = None
        if lengths is not None:
            lengths = resolve_lengths(features, lengths)
            mask = tf.sequence_mask(lengths, size)[..., None]
            x = tf.where(mask, x, tf.zeros([], dtype))
            valid = tf.sequence_mask((lengths + self.factor - 1) // self.factor,
                                     size // self.factor)[..., None]  # fmt: skip
        x = tf.concat([tf.cast(cache, dtype), x], axis=1)
        y = self._subsample(x)
        if valid is not None:
            y = tf.where(valid, y, tf.zeros([], y.dtype))
        return y, x[:, size:]

    def get_config(self) -> dict[str, Any]:
        return with_attributes(
            super().get_config(), self, "d_model", "factor", "channels"
        )
