# SPDX-License-Identifier: Apache-2.0
"""The streaming-encoder contract: what a Transducer's encoder must offer.

A transducer encoder is a Keras layer that encodes features offline,
`encoder(features [B, T, F], lengths [B]) -> (encoded [B, T', units],
lengths' [B])`, and as a stream, chunk by chunk, with its states carried
explicitly (the form a TFLite program and a phone need):

- `units`: the width of the encoded frames;
- `subsampling`: feature frames per encoded frame (T' = ceil(T / subsampling));
- `default_chunk_frames`: the feature frames of one streaming step by
  default, a multiple of `subsampling` (where the stream equals the
  offline call);
- `left_context`: encoded frames before its chunk that a frame sees (None:
  its whole past, as an LSTM's);
- `initial_state(batch)`: the states before the first chunk, a list of
  tensors [batch, ...];
- `step(features [B, n * subsampling, F], states, lengths=None)`: one chunk
  (n static) -> (encoded [B, n, units], new states shaped as `states`);
  `lengths` [B] are the chunk's valid frames (an utterance's last chunk).

`TransducerEncoder` (LSTMs) and `ConformerEncoder` implement it;
`Transducer`, `Transducer.stream_encode` and `export_transducer` use
nothing else, so that an encoder of one's own that implements it trains,
streams and exports the same way.
"""

from typing import Any
from typing import Protocol
from typing import runtime_checkable

import tensorflow as tf

from tf_transducer.layers._checks import OutputShape
from tf_transducer.layers._checks import Shape
from tf_transducer.layers._checks import ceil_div

CONTRACT = (
    "units",
    "subsampling",
    "default_chunk_frames",
    "left_context",
    "initial_state",
    "step",
)


@runtime_checkable
class StreamingEncoder(Protocol):
    """The contract of a transducer encoder (see the module's docstring)."""

    units: int
    subsampling: int
    default_chunk_frames: int
    left_context: int | None

    def initial_state(self, batch: int) -> list[tf.Tensor]: ...

    def step(
        self, features: Any, states: Any, lengths: Any = None
    ) -> tuple[tf.Tensor, list[tf.Tensor]]: ...


class EncoderShapes:
    """Mixin: compute_output_shape of an encoder keeping the contract."""

    def compute_output_shape(
        self, features_shape: Shape, lengths_shape: Shape | None = None
    ) -> tuple[OutputShape, OutputShape]:
        """((B, ceil(T / subsampling), units), (B,)) of features (B, T, F)."""
        batch, frames = features_shape[0], features_shape[1]
        units, sub = self.units, self.subsampling  # type: ignore[attr-defined]
        return (batch, ceil_div(frames, sub), units), (batch,)


def check_streaming_encoder(layer: Any, name: str = "encoder") -> None:
    """ValueError naming `name` and what is missing unless layer keeps the contract."""
    missing = [attr for attr in CONTRACT if not hasattr(layer, attr)]
    if missing:
        raise ValueError(
            f"{name} must be a streaming encoder layer (TransducerEncoder, "
            f"ConformerEncoder, or one with {', '.join(CONTRACT)}); "
            f"{type(layer).__name__} lacks {', '.join(missing)}"
        )
    sub, chunk = layer.subsampling, layer.default_chunk_frames
    if (
        not isinstance(sub, int)
        or sub < 1
        or not isinstance(chunk, int)
        or chunk <= 0
        or chunk % sub
    ):
        raise ValueError(
            f"{name}: default_chunk_frames ({chunk!r}) must be a positive multiple "
            f"of subsampling ({sub!r})"
        )


def check_chunk_frames(chunk_frames: Any, subsampling: int) -> int:
    """chunk_frames, checked to be a positive multiple of the subsampling."""
    if (
        not isinstance(chunk_frames, int)
        or isinstance(chunk_frames, bool)
        or chunk_frames <= 0
        or chunk_frames % subsampling
    ):
        raise ValueError(
            f"chunk_frames must be a positive multiple of the encoder's "
            f"subsampling ({subsampling}), got {chunk_frames!r}"
        )
    return chunk_frames
