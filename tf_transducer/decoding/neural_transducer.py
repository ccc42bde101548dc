# SPDX-License-Identifier: Apache-2.0
"""Beam search for the Neural Transducer (tf_transducer.layers.NeuralTransducer).

Block by block: every hypothesis emits up to W - 1 labels in the block, each
step keeping the `beam` best extensions, and ends the block with <e> (forced
at the W-th output). Hypotheses that end the block with the same labels are
merged by adding their probabilities (their LSTM states are equal: the state
depends on the labels alone), then the `beam` best go on to the next block.
With a beam wide enough to keep everything this is the most probable label
sequence, its probability summed over alignments.
"""

from typing import TYPE_CHECKING
from typing import Any

import numpy as np
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer.decoding._numeric import log_softmax

if TYPE_CHECKING:
    from tf_transducer.layers import NeuralTransducer


def _merge(
    table: dict[tuple[int, ...], tuple[float, Any]],
    labels: tuple[int, ...],
    score: float,
    state: Any,
) -> None:
    if labels in table:
        table[labels] = (np.logaddexp(table[labels][0], score), state)
    else:
        table[labels] = (score, state)


def neural_transducer_greedy_decode(
    layer: "NeuralTransducer", encoder: TensorLike, encoder_lengths: TensorLike
) -> list[list[int]]:
    """Block-by-block greedy decoding with a NeuralTransducer layer, eagerly.

    Each block gives the layer's `step`: its best output until <e>.

    Args:
      layer: the `tf_transducer.layers.NeuralTransducer`.
      encoder: float [B, T, D] encoder frames.
      encoder_lengths: int [B] valid frames.

    Returns:
      B label lists.
    """
    frames, mask, _ = layer.blocks(encoder, encoder_lengths)
    state = layer.initial_state(encoder, encoder_lengths)
    lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=2)  # [B, NB]
    hyps: list[list[int]] = [[] for _ in range(int(tf.shape(encoder)[0]))]
    for k in range(int(tf.shape(frames)[1])):
        labels, _, state = layer.step(frames[:, k], lengths[:, k], state)
        for b, row in enumerate(np.asarray(labels)):
            hyps[b].extend(int(y) for y in row if y >= 0)
    return hyps


def neural_transducer_beam_search(
    layer: "NeuralTransducer",
    encoder: TensorLike,
    encoder_lengths: TensorLike,
    beam: int = 4,
) -> list[tuple[list[int], float]]:
    """Beam search (see the module docstring) with a NeuralTransducer layer.

    Args:
      layer: the `tf_transducer.layers.NeuralTransducer`.
      encoder: float [B, T, D] encoder frames.
      encoder_lengths: int [B] valid frames.
      beam: hypotheses kept (an int >= 1).

    Returns:
      B (labels, log-probability) pairs.
    """
    if not isinstance(beam, int) or beam < 1:
        raise ValueError(f"beam must be an int >= 1, got {beam!r}")
    W, e = layer.transducer_max_width, layer.e_symbol_index
    encoder = tf.convert_to_tensor(encoder)
    encoder_lengths = tf.convert_to_tensor(encoder_lengths)
    frames, mask, num_blocks = layer.blocks(encoder, encoder_lengths)
    results: list[tuple[list[int], float]] = []
    for b in range(int(tf.shape(encoder)[0])):
        start = layer.initial_state(encoder[b : b + 1], encoder_lengths[b : b + 1])
        hyps: dict[tuple[int, ...], tuple[float, Any]] = {
            (): (0.0, [s.numpy() for s in start])
        }
        for block in range(int(num_blocks[b])):
            f, m = frames[b : b + 1, block], mask[b : b + 1, block]
            finished: dict[tuple[int, ...], tuple[float, Any]] = {}
            active = [(score, labels, state) for labels, (score, state) in hyps.items()]
            for k in range(W):
                if not active:
                    break
                outs = np.concatenate([state[0] for _, _, state in active])
                n = len(active)
                logits = layer.head(
                    outs[:, None], tf.repeat(f, n, 0), tf.repeat(m, n, 0), index=k
                )[:, 0]
                log_probs = log_softmax(logits)
                grown = []
                for (score, labels, state), row in zip(active, log_probs, strict=True):
                    _merge(finished, labels, score + row[e], state)
                    if k == W - 1:
                        continue  # the last output of a block is <e>
                    best = [int(y) for y in np.argsort(-row) if y != e][:beam]
                    grown += [(score + row[y], labels + (y,), state, y) for y in best]
                grown = sorted(grown, key=lambda g: -g[0])[:beam]
                active = []
                if grown:
                    h = np.concatenate([g[2][1] for g in grown])
                    c = np.concatenate([g[2][2] for g in grown])
                    ys = tf.constant([g[3] for g in grown])
                    out, (h, c) = layer.cell(layer.embedding(ys), [h, c])
                    out, h, c = out.numpy(), h.numpy(), c.numpy()
                    for i, (score, labels, _, _) in enumerate(grown):
                        state = [out[i : i + 1], h[i : i + 1], c[i : i + 1]]
                        active.append((score, labels, state))
            kept = sorted(finished.items(), key=lambda item: -item[1][0])[:beam]
            hyps = dict(kept)
        labels, (score, _) = max(hyps.items(), key=lambda item: item[1][0])
        results.append((list(labels), float(score)))
    return results
