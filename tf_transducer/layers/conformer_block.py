# SPDX-License-Identifier: Apache-2.0
"""ConformerBlock: FFN / 2, relative-position self-attention, causal conv, FFN / 2."""

from collections.abc import Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tf_transducer._checks import check_positive
from tf_transducer._checks import float_values
from tf_transducer._checks import resolve_lengths
from tf_transducer._checks import with_attributes
from tf_transducer.layers._checks import ListLengths
from tf_transducer.layers._checks import OutputShape
from tf_transducer.layers._checks import Shape
from tf_transducer.layers._checks import TracedOutputSpec
from tf_transducer.layers.conv_subsampling import check_width


def masked_softmax(scores: tf.Tensor, allowed: tf.Tensor) -> tf.Tensor:
    """Softmax over the last axis of scores where allowed, exactly 0 elsewhere.

    No large constant stands in for the masked scores: every intermediate
    stays in the scores' own range, which int8 quantisation needs (a -1e9
    fill makes one int8 step worth millions, and all the scores equal).
    A row with nothing allowed is all 0.

    Args:
      scores: float [..., K].
      allowed: bool, broadcastable to scores.
    """
    low = tf.reduce_min(scores, axis=-1, keepdims=True)
    top = tf.reduce_max(tf.where(allowed, scores, low), axis=-1, keepdims=True)
    shifted = tf.where(allowed, scores - tf.stop_gradient(top), tf.zeros_like(scores))
    weights = tf.exp(shifted) * tf.cast(allowed, scores.dtype)
    total = tf.reduce_sum(weights, axis=-1, keepdims=True)
    return weights / tf.maximum(total, tf.ones_like(total))  # total >= 1 if any


def chunk_attention_mask(frames: Any, chunk_size: Any, left_context: int) -> tf.Tensor:
    """Which keys each query may see, in chunks: bool [frames, frames].

    Query i, in chunk c = i // chunk_size, sees keys j with
    c * chunk_size - left_context <= j < (c + 1) * chunk_size: its own chunk
    (later frames of it included) and left_context frames before it, never
    a later chunk. `frames` and `chunk_size` may be scalar tensors.
    """
    positions = tf.range(frames)
    start = positions[:, None] // chunk_size * chunk_size
    keys = positions[None, :]
    return (keys >= start - left_context) & (keys < start + chunk_size)


def swish(x: tf.Tensor) -> tf.Tensor:
    """x * sigmoid(x), written out.

    (tf.nn.silu's custom gradient keeps a function that uses it from being
    saved for TFLite.)
    """
    return x * tf.sigmoid(x)


def check_dropout(dropout: Any) -> None:
    """ValueError unless dropout is a number in [0, 1)."""
    if not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must lie in [0, 1), got {dropout!r}")


@keras.saving.register_keras_serializable(package="tf_transducer")
class ConformerBlock(TracedOutputSpec, ListLengths, keras.layers.Layer):
    """One Conformer block that streams: every part is causal or chunk-masked.

        x = x + FFN(x) / 2
        x = x + MHSA(LN(x))             (relative-position bias, masked)
        x = x + Conv(x)                 (LN, pointwise, GLU, causal depthwise,
                                         LN, swish, pointwise)
        y = LN(x + FFN(x) / 2)          (FFN: LN, Dense, swish, Dense)

    Relative positions are a learned bias per head and distance added to
    the attention scores (as T5's, without buckets): query i and key j get
    bias[h, clip(i - j, -M, M)] with M = max_relative_position. The depthwise
    convolution is causal (k - 1 zero frames before the utterance), its
    normalisation a LayerNorm over channels, so nothing depends on the
    future or on the batch. Padding (frames at and after each length) is set
    to 0, never attended to, and the outputs there are 0.

    Streaming (`step`): the cache is [attention inputs (the LN(x) of the
    last L frames) [B, L, D], their validity (1 or 0) [B, L], the depthwise
    convolution's last k - 1 input frames [B, k - 1, D]]; a chunk attends
    to itself and the cached frames, which equals the offline call with
    `chunk_attention_mask(T, C, L)` for chunks of C frames.

    Args:
      d_model: the width D (of inputs and outputs).
      num_heads: attention heads (dividing d_model).
      ff_mult: the feed-forward's hidden width is ff_mult * d_model.
      conv_kernel: the depthwise convolution's kernel size k (>= 2).
      dropout: after each module and in the feed-forwards, in training.
      max_relative_position: M, the largest distance with its own bias.

    Call arguments:
      x: float [B, T, D]; lengths: optional int [B]; attention_mask: optional
      bool [T, T] or [B, T, T], True where query i may see key j (e.g.
      `chunk_attention_mask`; default all valid keys).

    Returns:
      float [B, T, D].
    """

    def __init__(
        self, d_model: int = 144, num_heads: int = 4, ff_mult: int = 4,
        conv_kernel: int = 15, dropout: float = 0.0, max_relative_position: int = 64,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(**kwargs)
        check_positive("d_model", d_model, int)
        check_positive("num_heads", num_heads, int)
        if d_model % num_heads:
            raise ValueError(
                f"num_heads must divide d_model, got num_heads={num_heads} for "
                f"d_model={d_model}"
            )
        check_positive("ff_mult", ff_mult, int)
        check_positive("conv_kernel", conv_kernel, int)
        if conv_kernel < 2:
            raise ValueError(f"conv_kernel must be >= 2, got {conv_kernel}")
        check_dropout(dropout)
        check_positive("max_relative_position", max_relative_position, int)
        self.d_model, self.num_heads, self.ff_mult = d_model, num_heads, ff_mult
        self.conv_kernel, self.dropout = conv_kernel, dropout
        self.max_relative_position = max_relative_position

        def norm(name):
            return keras.layers.LayerNormalization(epsilon=1e-5, name=name)

        def dense(units, name):
            return keras.layers.Dense(units, name=name)

        self.ffns = [
            (
                norm(f"ffn{i}_norm"),
                dense(ff_mult * d_model, f"ffn{i}_inner"),
                dense(d_model, f"ffn{i}_outer"),
            )
            for i in (1, 2)
        ]
        self.attention_norm = norm("attention_norm")
        self.query, self.key, self.value, self.attention_out = (
            dense(d_model, name) for name in ("query", "key", "value", "attention_out")
        )
        self.conv_norm = norm("conv_norm")
        self.pointwise_in = dense(2 * d_model, "pointwise_in")
        self.depthwise = keras.layers.DepthwiseConv1D(
            conv_kernel, padding="valid", name="depthwise"
        )
        self.depthwise_norm = norm("depthwise_norm")
        self.pointwise_out = dense(d_model, "pointwise_out")
        self.out_norm = norm("out_norm")
        self.drop = keras.layers.Dropout(dropout)

    def build(
        self,
        x_shape: Shape,
        lengths_shape: Shape | None = None,
        attention_mask_shape: Shape | None = None,
    ) -> None:
        if x_shape[-1] != self.d_model:
            raise ValueError(
                f"x must be [B, T, {self.d_model}] (d_model), got shape {x_shape}"
            )
        d, wide = (None, None, self.d_model), (None, None, self.ff_mult * self.d_model)
        for norm, inner, outer in self.ffns:
            norm.build(d)
            inner.build(d)
            outer.build(wide)
        for layer in (self.attention_norm, self.query, self.key, self.value,
                      self.attention_out, self.conv_norm, self.pointwise_in,
                      self.depthwise, self.depthwise_norm, self.pointwise_out,
                      self.out_norm):  # fmt: skip
            layer.build(d)
        self.relative_bias = self.add_weight(
            shape=(self.num_heads, 2 * self.max_relative_position + 1),
            initializer="zeros",
            name="relative_bias",
        )
        self.built = True

    # -------------------------------------------------------------- parts

    def _ffn(self, x, index, training):
        norm, inner, outer = self.ffns[index]
        h = self.drop(swish(inner(norm(x))), training=training)
        return self.drop(outer(h), training=training)

    def _heads(self, x):
        """[B, T, D] -> [B, H, T, D / H]."""
        shape = tf.shape(x)
        x = tf.reshape(x, [shape[0], shape[1], self.num_heads, -1])
        return tf.transpose(x, [0, 2, 1, 3])

    def _attend(self, queries, keys, allowed, distance, training):
        """Attention of queries [B, Tq, D] to keys [B, Tk, D] (both LN'd).

        allowed: bool [B or 1, Tq or 1, Tk]; distance: int [Tq, Tk], the
        query's position minus the key's.
        """
        q, k, v = (
            self._heads(self.query(queries)),
            self._heads(self.key(keys)),
            self._heads(self.value(keys)),
        )
        scores = tf.cast(tf.matmul(q, k, transpose_b=True), tf.float32)
        scores *= (self.d_model // self.num_heads) ** -0.5
        m = self.max_relative_position
        index = tf.clip_by_value(distance, -m, m) + m
        bias = tf.gather(tf.cast(self.relative_bias, tf.float32), index, axis=1)
        probs = tf.cast(masked_softmax(scores + bias, allowed[:, None]), v.dtype)
        out = tf.transpose(tf.matmul(probs, v), [0, 2, 1, 3])
        shape = tf.shape(queries)
        out = self.attention_out(tf.reshape(out, [shape[0], shape[1], self.d_model]))
        return self.drop(out, training=training)

    def _convolve(self, x, valid, left, training):
        """The convolution module on x [B, T, D]: (out, its depthwise input).

        left: the k - 1 depthwise inputs before x [B, k - 1, D] (None: zeros).
        """
        a, b = tf.split(self.pointwise_in(self.conv_norm(x)), 2, axis=-1)
        h = tf.where(valid[..., None], a * tf.sigmoid(b), tf.zeros([], a.dtype))
        if left is None:
            h = tf.pad(h, [[0, 0], [self.conv_kernel - 1, 0], [0, 0]])
        else:
            h = tf.concat([tf.cast(left, h.dtype), h], axis=1)
        y = swish(self.depthwise_norm(self.depthwise(h)))
        return self.drop(self.pointwise_out(y), training=training), h

    def _forward(self, x, valid, cached, allowed, distance, left, training):
        """The block on x [B, T, D] (0 where not valid [B, T]).

        With the attention inputs `cached` [B, L, D] before x (None: none).
        Returns (y, the attention inputs [B, L + T, D], the depthwise inputs).
        """
        x = x + 0.5 * self._ffn(x, 0, training)
        h = self.attention_norm(x)
        keys = h if cached is None else tf.concat([tf.cast(cached, h.dtype), h], 1)
        x = x + self._attend(h, keys, allowed, distance, training)
        conv, depthwise_in = self._convolve(x, valid, left, training)
        x = x + conv
        y = self.out_norm(x + 0.5 * self._ffn(x, 1, training))
        y = tf.where(valid[..., None], y, tf.zeros([], y.dtype))
        return y, keys, depthwise_in

    # -------------------------------------------------------------- calls

    def call(
        self, x: Any, lengths: Any = None, attention_mask: Any = None,
        training: bool | None = None,
    ) -> tf.Tensor:  # fmt: skip
        x = check_width("x", float_values(x, "x"), self.d_model)
        lengths = resolve_lengths(x, lengths)
        frames = tf.shape(x)[1]
        valid = tf.sequence_mask(lengths, frames)
        x = tf.cast(x, self.compute_dtype)
        x = tf.where(valid[..., None], x, tf.zeros([], x.dtype))
        allowed = valid[:, None, :]
        if attention_mask is not None:
            attention_mask = tf.convert_to_tensor(attention_mask)
            rank = attention_mask.shape.rank
            if attention_mask.dtype != tf.bool or rank not in (2, 3):
                raise ValueError(
                    "attention_mask must be bool [T, T] or [B, T, T], got "
                    f"{attention_mask.dtype.name} of shape {attention_mask.shape}"
                )
            if attention_mask.shape.rank == 2:
                attention_mask = attention_mask[None]
            allowed &= attention_mask
        positions = tf.range(frames)
        distance = positions[:, None] - positions[None, :]
        y, _, _ = self._forward(x, valid, None, allowed, distance, None, training)
        return y

    def compute_output_shape(
        self,
        x_shape: Shape,
        lengths_shape: Shape | None = None,
        attention_mask_shape: Shape | None = None,
    ) -> OutputShape:
        return tuple(x_shape)

    def initial_state(self, batch: int, left_context: int) -> list[tf.Tensor]:
        """The zero cache for `left_context` frames.

        [[batch, left_context, D], [batch, left_context] (no frame valid),
        [batch, k - 1, D]].
        """
        dtype = self.compute_dtype
        return [
            tf.zeros([batch, left_context, self.d_model], dtype),
            tf.zeros([batch, left_context], dtype),
            tf.zeros([batch, self.conv_kernel - 1, self.d_model], dtype),
        ]

    def step(
        self, x: Any, cache: Sequence[Any], lengths: Any = None
    ) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """The block on one streaming chunk: (y [B, C, D], new cache).

        Args:
          x: float [B, C, D], C static.
          cache: [attention inputs [B, L, D], validity [B, L] (1.0 valid,
            0.0 not), depthwise inputs [B, k - 1, D]] (`initial_state` at the
            start), as returned by the step before.
          lengths: optional int [B], the valid frames of the chunk.

        Returns:
          (y [B, C, D], 0 past lengths; the cache after the chunk, each part
          shaped as before).
        """
        x = float_values(x, "x")
        size = x.shape[1]
        if x.shape.rank != 3 or size is None or x.shape[2] != self.d_model:
            raise ValueError(
                f"x must be [B, C, {self.d_model}] with C static, got shape {x.shape}"
            )
        if len(cache) != 3:
            raise ValueError(f"cache must hold 3 tensors, got {len(cache)}")
        cached, cached_valid, left = (tf.convert_to_tensor(c) for c in cache)
        context = cached.shape[1]
        for name, part, want in (
            ("cache[0]", cached, [context, self.d_model]),
            ("cache[1]", cached_valid, [context]),
            ("cache[2]", left, [self.conv_kernel - 1, self.d_model]),
        ):
            if context is None or part.shape[1:].as_list() != want:
                raise ValueError(f"{name} must be [B, {want}], got {part.shape}")
        x = tf.cast(x, self.compute_dtype)
        if lengths is None:
            valid = tf.ones_like(x[..., 0], tf.bool)
        else:
            valid = tf.sequence_mask(resolve_lengths(x, lengths), size)
            x = tf.where(valid[..., None], x, tf.zeros([], x.dtype))
        keys_valid = tf.concat([cached_valid > 0.5, valid], axis=1)
        queries = np.arange(size) + context
        distance = tf.constant(queries[:, None] - np.arange(context + size)[None])
        y, keys, depthwise_in = self._forward(
            x, valid, cached, keys_valid[:, None], distance, left, False
        )
        new_valid = tf.concat([cached_valid, tf.cast(valid, cached_valid.dtype)], 1)
        return y, [keys[:, size:], new_valid[:, size:], depthwise_in[:, size:]]

    def get_config(self) -> dict[str, Any]:
        return with_attributes(
            super().get_config(), self, "d_model", "num_heads", "ff_mult",
            "conv_kernel", "dropout", "max_relative_position",
        )  # fmt: skip
