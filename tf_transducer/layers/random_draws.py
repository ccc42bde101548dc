# SPDX-License-Identifier: Apache-2.0
"""Random numbers for augmentation: Keras seed streams or a counter-based hash.

`Draws` gives SpecAugment its uniform and normal numbers, either from a
Keras `SeedGenerator` (reproducible with a seed, fresh on every call) or,
statelessly, from `hash_uniform`: SplitMix64 of each number's index, the
seed and a stream number, in integer ops only, so that eager, graph and XLA
runs draw the same numbers. `input_seed` makes such a seed from a batch's
valid values (the same input gives the same augmentation, however padded).
"""

import keras
import tensorflow as tf

# A prime that spreads (stream, utterance) and (utterance, frame) pairs apart
# in the stateless hash's inputs.
SPREAD = 1_000_003


def _wrap64(value):
    """An unsigned 64-bit constant as the int64 with the same bits."""
    return value - (1 << 64) if value >= 1 << 63 else value


_GOLDEN = _wrap64(0x9E3779B97F4A7C15)
_MIX_1 = _wrap64(0xBF58476D1CE4E5B9)
_MIX_2 = _wrap64(0x94D049BB133111EB)


def _shift_right(x, bits):
    """Logical right shift of int64 bit patterns."""
    return tf.bitwise.bitwise_and(
        tf.bitwise.right_shift(x, bits), tf.constant((1 << (64 - bits)) - 1, tf.int64)
    )


def _splitmix64(z):
    """SplitMix64's output function on int64 bit patterns (wrapping)."""
    z = z + _GOLDEN
    z = tf.bitwise.bitwise_xor(z, _shift_right(z, 30)) * _MIX_1
    z = tf.bitwise.bitwise_xor(z, _shift_right(z, 27)) * _MIX_2
    return tf.bitwise.bitwise_xor(z, _shift_right(z, 31))


def hash_uniform(shape, seed, stream):
    """float32 uniform [0, 1) numbers of `shape` from an int64 [2] seed.

    Counter-based: the number at index (i, j, ...) is SplitMix64 of that
    index (with fixed strides, so that it does not depend on the sizes: a
    batch padded further draws the same numbers for its valid entries), the
    seed and the stream, in integer ops only, so eager, graph and XLA give
    the same numbers (TensorFlow's stateless generators differ between XLA
    and the CPU kernels).
    """
    seed = tf.cast(seed, tf.int64)
    stream = tf.constant(stream, tf.int64)
    key = _splitmix64(seed[0] * _MIX_1 + seed[1] + stream * _GOLDEN)
    shape = tf.cast(tf.convert_to_tensor(shape), tf.int64)
    counter = tf.zeros([], tf.int64)
    for axis in range(int(shape.shape[0])):
        index = tf.range(shape[axis])
        index = tf.reshape(index, tf.tensor_scatter_nd_update(
            tf.ones_like(shape), [[axis]], [-1]))  # fmt: skip
        counter = counter * (1 << 21) + index
    bits = _splitmix64(_splitmix64(counter + key))
    top24 = tf.cast(_shift_right(bits, 40), tf.float32)
    return tf.broadcast_to(top24 * (1.0 / (1 << 24)), shape)


class Draws:
    """Random numbers for the blocks: stateful (Keras) or stateless (seeded).

    Args:
      seed_generator: a `keras.random.SeedGenerator`, or None for stateless.
      seed: int64 [2] seed of the stateless draws (when seed_generator is
        None): `hash_uniform`, the same in eager, graph and XLA.
    """

    def __init__(self, seed_generator=None, seed=None):
        if (seed_generator is None) == (seed is None):
            raise ValueError("give exactly one of seed_generator and seed")
        self.seed_generator = seed_generator
        self.seed = seed

    def uniform(self, shape, stream, minval=0.0, maxval=1.0):
        """float32 uniform in [minval, maxval)."""
        if self.seed_generator is not None:
            return keras.random.uniform(
                shape, minval, maxval, "float32", seed=self.seed_generator
            )
        return minval + (maxval - minval) * hash_uniform(shape, self.seed, stream)

    def normal(self, shape, stream, mean=0.0, stddev=1.0):
        if self.seed_generator is not None:
            return keras.random.normal(
                shape, mean, stddev, "float32", seed=self.seed_generator
            )
        # Box-Muller on two independent uniform draws.
        u1 = 1.0 - hash_uniform(shape, self.seed, stream)  # (0, 1]
        u2 = hash_uniform(shape, self.seed, stream + SPREAD)
        radius = tf.sqrt(-2.0 * tf.math.log(u1))
        return mean + stddev * radius * tf.cos(2.0 * 3.141592653589793 * u2)


def input_seed(x, lengths):
    """int64 [2] seed that is a function of the valid frames of x (and lengths).

    The float bits of every valid value, weighted by its place (utterance,
    frame, feature: not by the padded length), summed (int64 arithmetic
    wraps): the same utterances give the same seed, however padded.
    """
    x = tf.convert_to_tensor(x)
    valid = expand_like(tf.sequence_mask(lengths, tf.shape(x)[1]), x)
    bits = tf.cast(tf.bitcast(tf.cast(x, tf.float32), tf.int32), tf.int64)
    shape = tf.shape(bits, out_type=tf.int64)
    b = tf.range(shape[0])[:, None]
    t = tf.range(shape[1])[None, :]
    per_frame = tf.reduce_prod(shape[2:])  # values per frame
    frame_start = (b * SPREAD + t) * per_frame  # [B, T]
    within = tf.reshape(tf.range(per_frame), tf.concat([[1, 1], shape[2:]], 0))
    position = (
        tf.reshape(frame_start, tf.concat([shape[:2], tf.ones_like(shape[2:])], 0))
        + within
    )
    zero = tf.zeros_like(bits)
    a = tf.reduce_sum(tf.where(valid, bits * (2 * position + 1), zero))
    b = tf.reduce_sum(
        tf.where(valid, bits ^ (position * 0x9E3779B1), zero)
    ) + tf.reduce_sum(tf.cast(lengths, tf.int64))
    return tf.stack([a, b])


def expand_like(mask, x):
    """[B, T] -> broadcastable against x [B, T, ...]."""
    return tf.reshape(mask, tf.concat([tf.shape(mask), [1] * (x.shape.rank - 2)], 0))
