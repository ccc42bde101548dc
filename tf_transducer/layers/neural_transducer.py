# SPDX-License-Identifier: Apache-2.0
"""The Neural Transducer (Jaitly et al. 2015, arXiv 1511.04868) as a Keras layer.

The encoder's frames are cut into blocks of `input_block_size` frames (the
last one padded). For each block an attention LSTM emits up to
`transducer_max_width` outputs, the last being the end-of-block symbol <e>
(`e_symbol_index`); its state carries on to the next block.

The transducer LSTM reads the labels it emitted (its first input is <e>, as
"nothing yet"), not the <e>s; for the k-th output of a block its output,
plus a learned embedding of k, attends (Luong, "general" scores) over the
block's frames f_n (plus a learned embedding of their index n):

    o_s      = LSTM(embedding(y_{s-1}), state)        labels y_1..y_s-1 read
    q        = o_s + P_out[k]
    a        = softmax_n(q . (W_m f_n + P_in[n]))     over the block's frames
    logits   = W_o tanh(W_c [q; sum_n a_n f_n])       [n_out]

So the distribution depends on (block b, labels read s, index k) alone, not
on which earlier blocks emitted which labels: the best alignment of the
targets to the blocks is an exact dynamic programme
(`tf_transducer.ops.neural_transducer`), where the paper (and RETURNN's
layer, whose LSTM also reads the <e>s and its attention) needed an
approximate search. Training computes every (b, s, k) distribution at once
([B, NB, U + 1, W, n_out], teacher-forced); `step` decodes one block
greedily, for streaming.
"""

from collections.abc import Sequence
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import after
from tf_transducer._checks import first_bad
from tf_transducer._checks import require
from tf_transducer._checks import resolve_lengths
from tf_transducer._checks import with_attributes
from tf_transducer.layers._checks import OutputShape
from tf_transducer.layers._checks import Shape
from tf_transducer.layers._checks import TracedOutputSpec
from tf_transducer.layers._checks import ceil_div


@keras.saving.register_keras_serializable(package="tf_transducer")
class NeuralTransducer(TracedOutputSpec, keras.layers.Layer):
    """Block-wise attention transducer.

    Args:
      n_out: outputs, including <e> (labels are the other ids).
      transducer_hidden_units: LSTM (and attention) width H.
      transducer_max_width: W, outputs per block including <e> (>= 1): up to
        W - 1 labels per block.
      input_block_size: N, encoder frames per block.
      embedding_size: label embedding width.
      e_symbol_index: the id of <e> in [0, n_out).
      use_prev_state_as_start: start the LSTM from the encoder's output at
        the last frame of the first block (as both h and c; needs the
        encoder width to be H) instead of zeros.

    Call: (encoder [B, T, D], encoder_lengths [B], labels [B, U] with ids
    past each length ignored) -> {"logits": [B, NB, U + 1, W, n_out],
    "num_blocks": [B]}: logits[b, j, s, k] are those of the k-th output of
    block j after s labels. NB = ceil(T / N).
    """

    def __init__(
        self, n_out: int, transducer_hidden_units: int, transducer_max_width: int,
        input_block_size: int, embedding_size: int, e_symbol_index: int,
        use_prev_state_as_start: bool = False, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(**kwargs)
        for name, value in (
            ("n_out", n_out),
            ("transducer_hidden_units", transducer_hidden_units),
            ("transducer_max_width", transducer_max_width),
            ("input_block_size", input_block_size),
            ("embedding_size", embedding_size),
        ):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if not isinstance(e_symbol_index, int) or not 0 <= e_symbol_index < n_out:
            raise ValueError(
                f"e_symbol_index must be an int in [0, n_out={n_out}), got "
                f"{e_symbol_index!r}"
            )
        self.n_out = n_out
        self.transducer_hidden_units = transducer_hidden_units
        self.transducer_max_width = transducer_max_width
        self.input_block_size = input_block_size
        self.embedding_size = embedding_size
        self.e_symbol_index = e_symbol_index
        self.use_prev_state_as_start = bool(use_prev_state_as_start)
        H = transducer_hidden_units
        self.embedding = keras.layers.Embedding(n_out, embedding_size, name="embedding")
        self.cell = keras.layers.LSTMCell(H, name="lstm")
        self.memory = keras.layers.Dense(H, use_bias=False, name="memory")
        self.output_position = keras.layers.Embedding(
            transducer_max_width, H, name="output_position"
        )
        self.frame_position = keras.layers.Embedding(
            input_block_size, H, name="frame_position"
        )
        self.attention = keras.layers.Dense(
            H, activation="tanh", use_bias=False, name="attention"
        )
        self.projection = keras.layers.Dense(n_out, use_bias=False, name="output")

    def build(
        self,
        encoder_shape: Shape,
        encoder_lengths_shape: Shape | None = None,
        labels_shape: Shape | None = None,
    ) -> None:
        D = encoder_shape[-1]
        if D is None:
            raise ValueError(
                f"encoder must have a static width D, got shape {encoder_shape}"
            )
        H = self.transducer_hidden_units
        if self.use_prev_state_as_start and D != H:
            raise ValueError(
                "use_prev_state_as_start needs the encoder width to equal "
                f"transducer_hidden_units, got {D} and {H}"
            )
        self.embedding.build((None,))
        self.cell.build((None, self.embedding_size))
        self.memory.build((None, D))
        self.output_position.build((None,))
        self.frame_position.build((None,))
        self.attention.build((None, H + D))
        self.projection.build((None, H))

    def compute_output_shape(
        self,
        encoder_shape: Shape,
        encoder_lengths_shape: Shape | None = None,
        labels_shape: Shape | None = None,
    ) -> dict[str, OutputShape]:
        """{"logits": (B, NB, U + 1, W, n_out), "num_blocks": (B,)}."""
        batch = encoder_shape[0]
        blocks = ceil_div(encoder_shape[1], self.input_block_size)
        steps = None
        if labels_shape is not None and labels_shape[1] is not None:
            steps = labels_shape[1] + 1
        return {
            "logits": (batch, blocks, steps, self.transducer_max_width, self.n_out),
            "num_blocks": (batch,),
        }

    # ---------------------------------------------------------------- pieces
    def blocks(
        self, encoder: TensorLike, encoder_lengths: TensorLike
    ) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """(frames [B, NB, N, D], frame mask [B, NB, N], num_blocks [B])."""
        N = self.input_block_size
        T = tf.shape(encoder)[1]
        blocks = (T + N - 1) // N
        padded = tf.pad(encoder, [[0, 0], [0, blocks * N - T], [0, 0]])
        shape = tf.shape(encoder)
        frames = tf.reshape(padded, tf.stack([shape[0], blocks, N, shape[2]]))
        lengths = resolve_lengths(encoder, encoder_lengths, "encoder_lengths")
        index = tf.reshape(tf.range(blocks * N), tf.stack([1, blocks, N]))
        mask = index < lengths[:, None, None]
        # Padding frames are never read, whatever they hold.
        frames = tf.where(mask[..., None], frames, tf.zeros_like(frames))
        return frames, mask, (lengths + N - 1) // N

    def start_state(
        self, encoder: tf.Tensor, encoder_lengths: TensorLike
    ) -> list[tf.Tensor]:
        """[h, c] before the first input: zeros, or the first block's last frame."""
        batch = tf.shape(encoder)[0]
        if not self.use_prev_state_as_start:
            zeros = tf.zeros(
                tf.stack([batch, self.transducer_hidden_units]), encoder.dtype
            )
            return [zeros, zeros]
        last = tf.minimum(tf.cast(encoder_lengths, tf.int32), self.input_block_size) - 1
        h = tf.gather(encoder, tf.maximum(last, 0), batch_dims=1)
        h = tf.where((last >= 0)[:, None], h, 0.0)
        return [h, h]

    def head(
        self,
        outputs: tf.Tensor,
        frames: tf.Tensor,
        mask: tf.Tensor,
        index: int | None = None,
    ) -> tf.Tensor:
        """Logits from LSTM outputs attending over their blocks' frames.

        outputs [..., S, H]; frames [..., N, D]; mask [..., N]
        -> logits [..., S, W, n_out] for every in-block index k, or
        [..., S, n_out] for one given index.
        """
        N = tf.shape(frames)[-2]
        keys = self.memory(frames) + self.frame_position(tf.range(N))  # [..., N, H]
        if index is None:
            queries = outputs[..., None, :] + self.output_position(
                tf.range(self.transducer_max_width)
            )  # [..., S, W, H]
            mask = mask[..., None, None, :]
            pattern = ("...swh,...nh->...swn", "...swn,...nd->...swd")
        else:
            queries = outputs + self.output_position(tf.constant(index))
            mask = mask[..., None, :]
            pattern = ("...sh,...nh->...sn", "...sn,...nd->...sd")
        scores = tf.einsum(pattern[0], queries, keys)
        # Masked frames: the dtype's lowest value (finite in float16 too).
        scores = tf.where(mask, scores, tf.cast(scores.dtype.min, scores.dtype))
        context = tf.einsum(pattern[1], tf.nn.softmax(scores, axis=-1), frames)
        return self.projection(self.attention(tf.concat([queries, context], -1)))

    def read_labels(self, labels: tf.Tensor, state: Sequence[tf.Tensor]) -> tf.Tensor:
        """LSTM outputs after 0..U labels: [B, U + 1, H] (first input: <e>)."""
        start = tf.fill(tf.stack([tf.shape(labels)[0], 1]), self.e_symbol_index)
        inputs = tf.concat([start, labels], axis=1)
        embedded = self.embedding(inputs)

        def step(carry, x):
            out, new = self.cell(x, carry)
            return new, out

        time_major = tf.transpose(embedded, [1, 0, 2])
        _, outputs = _scan_with_outputs(step, time_major, state)
        return tf.transpose(outputs, [1, 0, 2])

    def __call__(
        self,
        encoder: TensorLike,
        encoder_lengths: TensorLike,
        labels: TensorLike,
        **kwargs: Any,
    ) -> Any:
        # Keras wants tensors as positional arguments: lists are fine here.
        args = [
            tf.convert_to_tensor(a) if isinstance(a, (list, tuple, np.ndarray)) else a
            for a in (encoder, encoder_lengths, labels)
        ]
        return super().__call__(*args, **kwargs)

    def call(
        self, encoder: tf.Tensor, encoder_lengths: tf.Tensor, labels: tf.Tensor
    ) -> dict[str, tf.Tensor]:
        labels = tf.cast(labels, tf.int32)
        too_large = labels >= self.n_out
        value, index = first_bad(too_large, labels)
        with after(
            require(
                ~tf.reduce_any(too_large),
                f"labels must lie in [0, n_out = {self.n_out}) (negative: padding); "
                "got {} at [b, u] = {}",
                value,
                index,
            )
        ):
            labels = tf.where(labels >= 0, labels, 0)
        frames, mask, num_blocks = self.blocks(encoder, encoder_lengths)
        outputs = self.read_labels(labels, self.start_state(encoder, encoder_lengths))
        # [B, NB, U + 1, H] against [B, NB, N, D]
        blocks = tf.shape(frames)[1]
        tiled = tf.tile(outputs[:, None], tf.stack([1, blocks, 1, 1]))
        return {"logits": self.head(tiled, frames, mask), "num_blocks": num_blocks}

    # ------------------------------------------------------------- streaming
    def initial_state(
        self, encoder: tf.Tensor, encoder_lengths: TensorLike
    ) -> list[tf.Tensor]:
        """Decoding state [o, h, c] before the first block ([B, H] each).

        o is the LSTM output after reading <e>; h, c the LSTM state.
        """
        state = self.start_state(encoder, encoder_lengths)
        batch = tf.shape(encoder)[0]
        start = self.embedding(tf.fill([batch], self.e_symbol_index))
        out, (h, c) = self.cell(start, state)
        return [out, h, c]

    def step(
        self, frames: tf.Tensor, frame_lengths: TensorLike, state: Sequence[tf.Tensor]
    ) -> tuple[tf.Tensor, tf.Tensor, list[tf.Tensor]]:
        """Greedy decoding of one block.

        Args:
          frames: [B, N, D] the block's encoder frames.
          frame_lengths: int [B] valid frames in the block (0: no block; the
            state passes through).
          state: [o, h, c] from `initial_state` or the previous step.

        Returns:
          (labels int32 [B, W - 1] padded with -1, counts int32 [B], state).
        """
        W, e = self.transducer_max_width, self.e_symbol_index
        mask = (
            tf.range(tf.shape(frames)[1])[None]
            < tf.cast(frame_lengths, tf.int32)[:, None]
        )
        out, h, c = state
        done = tf.cast(frame_lengths, tf.int32) <= 0
        emitted = []
        for k in range(W):
            logits = self.head(out[:, None], frames, mask, index=k)[:, 0]
            best = tf.cast(tf.argmax(logits, axis=-1), tf.int32)
            if k == W - 1:
                break  # the last output of a block is <e>, whatever wins
            emit = tf.logical_not(done) & (best != e)
            emitted.append(tf.where(emit, best, -1))
            new_out, (new_h, new_c) = self.cell(
                self.embedding(tf.maximum(best, 0)), [h, c]
            )
            keep = emit[:, None]
            out, h, c = (
                tf.where(keep, new_out, out),
                tf.where(keep, new_h, h),
                tf.where(keep, new_c, c),
            )
            done = done | tf.logical_not(emit)
        if emitted:
            labels = tf.stack(emitted, axis=1)
        else:
            labels = tf.zeros(tf.stack([tf.shape(frames)[0], 0]), tf.int32)
        counts = tf.reduce_sum(tf.cast(labels >= 0, tf.int32), axis=1)
        return labels, counts, [out, h, c]

    def get_config(self) -> dict[str, Any]:
        return with_attributes(
            super().get_config(), self, "n_out", "transducer_hidden_units",
            "transducer_max_width", "input_block_size", "embedding_size",
            "e_symbol_index", "use_prev_state_as_start",
        )  # fmt: skip


def _scan_with_outputs(step, elems, state):
    """tf.scan over time-major elems with a list state: (final state, outputs)."""

    def body(carry, x):
        new_state, out = step(list(carry[1]), x)
        return out, new_state

    outputs, states = tf.scan(body, elems, initializer=(tf.zeros_like(state[0]), state))
    return [s[-1] for s in states], outputs
