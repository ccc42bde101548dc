# SPDX-License-Identifier: Apache-2.0
"""ConformerEncoder: causal subsampling + chunk-masked Conformer blocks, streamable."""

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from tf_transducer._checks import check_non_negative_int
from tf_transducer._checks import check_positive
from tf_transducer._checks import resolve_lengths
from tf_transducer._checks import with_attributes
from tf_transducer.layers._checks import ListLengths
from tf_transducer.layers._checks import Shape
from tf_transducer.layers._checks import TracedOutputSpec
from tf_transducer.layers.conformer_block import ConformerBlock
from tf_transducer.layers.conformer_block import check_dropout
from tf_transducer.layers.conformer_block import chunk_attention_mask
from tf_transducer.layers.conv_subsampling import FACTORS
from tf_transducer.layers.conv_subsampling import ConvSubsampling
from tf_transducer.layers.streaming import EncoderShapes


@keras.saving.register_keras_serializable(package="tf_transducer")
class ConformerEncoder(
    EncoderShapes, TracedOutputSpec, ListLengths, keras.layers.Layer
):
    """A streaming Conformer encoder: ConvSubsampling, then ConformerBlocks.

    Attention is in chunks of `chunk_size` encoder frames: frame i of chunk
    c (frames c * chunk_size .. (c + 1) * chunk_size - 1) sees its whole
    chunk and the `left_context` frames before the chunk, never a later
    chunk (`chunk_attention_mask`). Subsampling and convolutions are causal,
    so an encoder frame depends on no feature frame after its chunk: a chunk
    of chunk_size * subsampling feature frames is encoded as soon as it has
    arrived (the algorithmic latency), and `step` on consecutive chunks,
    with the caches carried, equals the offline call.

    With `chunk_sizes`, training draws one of them per batch (one model for
    several latencies); inference uses `chunk_size` or the call's
    `chunk_size`. `step` takes chunks of any n * subsampling frames: it
    then equals the offline call with chunk_size=n.

    Args:
      d_model: the width of every block (and of the output).
      num_layers: Conformer blocks.
      num_heads: attention heads (dividing d_model).
      ff_mult: feed-forward hidden width / d_model.
      conv_kernel: the causal depthwise convolutions' kernel size (>= 2).
      chunk_size: attention chunk, in encoder frames (after subsampling).
      left_context: encoder frames before its chunk a frame sees (>= 0).
      subsampling: 2, 4 or 8 feature frames per encoder frame.
      dropout: in training, after the subsampling and in the blocks.
      chunk_sizes: optional chunk sizes drawn from in training.
      max_relative_position: largest distance with its own attention bias
        (default left_context + the largest chunk - 1: every visible one).
      seed: of the chunk size draws.

    Call arguments:
      features: float [B, T, F] (F static); lengths: optional int [B];
      chunk_size: optional, overrides the chunk in this call.

    Returns:
      (encoded [B, ceil(T / subsampling), d_model], 0 past the lengths;
      lengths ceil(lengths / subsampling) [B]).

    Example:
    ```python
    encoder = ConformerEncoder(d_model=144, chunk_size=8, left_context=32)
    encoded, frames = encoder(features, lengths)  # offline, chunk-masked
    states = encoder.initial_state(1)
    for chunk in chunks:  # [1, 32, F] each: 8 encoder frames
        encoded, states = encoder.step(chunk, states)
    ```
    """

    def __init__(
        self, d_model: int = 144, num_layers: int = 4, num_heads: int = 4,
        ff_mult: int = 4, conv_kernel: int = 15, chunk_size: int = 8,
        left_context: int = 32, subsampling: int = 4, dropout: float = 0.1,
        chunk_sizes: Sequence[int] | None = None,
        max_relative_position: int | None = None, seed: int | None = None,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(**kwargs)
        check_positive("num_layers", num_layers, int)
        check_positive("chunk_size", chunk_size, int)
        check_non_negative_int("left_context", left_context)
        check_dropout(dropout)
        if subsampling not in FACTORS or isinstance(subsampling, bool):
            raise ValueError(
                f"subsampling must be one of {list(FACTORS)}, got {subsampling!r}"
            )
        if chunk_sizes is not None:
            if not isinstance(chunk_sizes, (list, tuple)) or not chunk_sizes:
                raise ValueError(
                    f"chunk_sizes must be a non-empty list of ints, got {chunk_sizes!r}"
                )
            for size in chunk_sizes:
                check_positive("chunk_sizes", size, int)
            chunk_sizes = list(chunk_sizes)
        if max_relative_position is None:
            largest = max([chunk_size, *(chunk_sizes or [])])
            max_relative_position = max(left_context + largest - 1, 1)
        self.d_model, self.num_layers, self.num_heads = d_model, num_layers, num_heads
        self.ff_mult, self.conv_kernel = ff_mult, conv_kernel
        self.chunk_size, self.left_context = chunk_size, left_context
        self.subsampling, self.dropout = subsampling, dropout
        self.chunk_sizes, self.seed = chunk_sizes, seed
        self.max_relative_position = max_relative_position
        self.subsampler = ConvSubsampling(d_model, subsampling, name="subsampling")
        self.blocks = [
            ConformerBlock(
                d_model,
                num_heads,
                ff_mult,
                conv_kernel,
                dropout,
                max_relative_position,
                name=f"block_{i}",
            )  # fmt: skip
            for i in range(num_layers)
        ]
        self.drop = keras.layers.Dropout(dropout)
        self.seed_generator = (
            keras.random.SeedGenerator(seed) if chunk_sizes is not None else None
        )

    @property
    def units(self) -> int:
        """The output width, d_model (as TransducerEncoder's `units`)."""
        return self.d_model

    @property
    def stack(self) -> int:
        """Feature frames per output frame, subsampling (TransducerEncoder's)."""
        return self.subsampling

    @property
    def default_chunk_frames(self) -> int:
        """Feature frames of a streaming step by default: one attention chunk.

        chunk_size * subsampling: the stream then equals the offline call.
        """
        return self.chunk_size * self.subsampling

    def build(self, features_shape: Shape, lengths_shape: Shape | None = None) -> None:
        self.subsampler.build(features_shape)
        for block in self.blocks:
            block.build((None, None, self.d_model))
        self.built = True

    def _chunk(self, training, chunk_size):
        """The chunk size of this call: a Python int or an int32 scalar."""
        if chunk_size is not None:
            check_positive("chunk_size", chunk_size, int)
            return chunk_size
        if training and self.chunk_sizes is not None:
            draw = keras.random.randint(
                (), 0, len(self.chunk_sizes), seed=self.seed_generator
            )
            return tf.gather(tf.constant(self.chunk_sizes, tf.int32), draw)
        return self.chunk_size

    def call(
        self, features: Any, lengths: Any = None, training: bool | None = None,
        chunk_size: int | None = None,
    ) -> tuple[tf.Tensor, tf.Tensor]:  # fmt: skip
        size = self._chunk(training, chunk_size)
        x, lengths = self.subsampler(features, lengths)
        x = self.drop(x, training=training)
        mask = chunk_attention_mask(tf.shape(x)[1], size, self.left_context)
        for block in self.blocks:
            x = block(x, lengths, mask, training=training)
        return x, lengths

    def initial_state(self, batch: int) -> list[tf.Tensor]:
        """The zero caches: a list of 2 + 2 * num_layers tensors.

        [subsampling cache [batch, subsampling - 1, F], validity of the
        cached frames [batch, left_context] (0.0: none yet), then per block
        its attention inputs [batch, left_context, d_model] and depthwise
        inputs [batch, conv_kernel - 1, d_model]].
        """
        states = [self.subsampler.initial_state(batch)]
        states.append(tf.zeros([batch, self.left_context], self.compute_dtype))
        for block in self.blocks:
            cached, _, left = block.initial_state(batch, self.left_context)
            states += [cached, left]
        return states

    def _state_shapes(self):
        """The states' shapes without the batch size, as initial_state's."""
        return [tuple(s.shape[1:]) for s in self.initial_state(1)]

    def step(
        self, features: Any, states: Sequence[Any], lengths: Any = None
    ) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """Encodes one streaming chunk: (encoded [B, n, d_model], new states).

        Args:
          features: float [B, subsampling * n, F], n static (chunk_size for
            the offline call's result).
          states: `initial_state`'s list, or the one the step before returned.
          lengths: optional int [B], the valid frames of this chunk (for an
            utterance's last chunk; default all).

        Returns:
          (encoded [B, n, d_model], 0 past ceil(lengths / subsampling); the
          new states, shaped as `states`).
        """
        want = 2 + 2 * self.num_layers
        if not isinstance(states, (list, tuple)) or len(states) != want:
            raise ValueError(
                f"states must be a list of {want} tensors (initial_state), got "
                f"{len(states) if isinstance(states, (list, tuple)) else type(states)}"
            )
        for i, (state, shape) in enumerate(
            zip(states, self._state_shapes(), strict=True)
        ):
            state = tf.convert_to_tensor(state)
            if state.shape.rank != len(shape) + 1 or state.shape[1:] != shape:
                raise ValueError(
                    f"states[{i}] must be [B, {', '.join(map(str, shape))}] "
                    f"(as initial_state), got shape {state.shape}"
                )
        out_lengths = None
        if lengths is not None:
            lengths = resolve_lengths(tf.convert_to_tensor(features), lengths)
            out_lengths = (lengths + self.subsampling - 1) // self.subsampling
        x, sub_cache = self.subsampler.step(features, states[0], lengths)
        valid = states[1]
        new_states = [sub_cache, None]
        for i, block in enumerate(self.blocks):
            cache = [states[2 + 2 * i], valid, states[3 + 2 * i]]
            x, (cached, new_valid, left) = block.step(x, cache, out_lengths)
            new_states += [cached, left]
        new_states[1] = new_valid
        return x, new_states

    def get_config(self) -> dict[str, Any]:
        return with_attributes(
            super().get_config(), self, "d_model", "num_layers", "num_heads", "ff_mult",
            "conv_kernel", "chunk_size", "left_context", "subsampling", "dropout",
            "chunk_sizes", "max_relative_position", "seed",
        )  # fmt: skip
