# SPDX-License-Identifier: Apache-2.0
"""SpecAugment (arXiv 1904.08779) with everything lingvo's SpectrumAugmenter does.

Building blocks (functions, usable on their own) and the Keras layer
`SpecAugment` that chains them per utterance, in lingvo's order:
frequency warp, time warp, frequency noise, time masks, frequency masks.

Shapes: features x [B, T, F, C] (the layer also takes [B, T, F]); lengths
[B] frames. Every block leaves the frames at and after an utterance's length
(its padding) exactly as they were, and a zero-length utterance unchanged.

Randomness comes from a `Draws` object: Keras `SeedGenerator` streams
(reproducible with a seed, fresh on every call) or, for input-dependent
stateless seeds, `tf.random.stateless_*` ops seeded from the batch itself
(the same input gives the same augmentation). Each draw has its own stream
number so that, as in lingvo, sizes and positions are not correlated.
"""

import keras
import tensorflow as tf

from tf_transducer.layers._checks import (
    ListLengths,
    finite_within,
    float_values,
    resolve_lengths,
)
from tf_transducer.ops._validation import after, require

# Each block draws from its own streams (stream, stream + 1, ...), so that
# switching one block off leaves the others' numbers unchanged.
TIME_MASK_STREAM = 10
FREQ_MASK_STREAM = 20
TIME_WARP_STREAM = 30
FREQ_WARP_STREAM = 40
FREQ_NOISE_STREAM = 50
# A prime that spreads (stream, utterance) and (utterance, frame) pairs apart
# in the stateless hash's inputs.
_SPREAD = 1_000_003

# Parameters that may be given per domain (one value per entry of domain_ids).
PER_DOMAIN = (
    "freq_mask_max_bins",
    "freq_mask_count",
    "use_dynamic_time_mask_max_frames",
    "time_mask_max_frames",
    "time_mask_count",
    "time_mask_max_ratio",
    "time_masks_per_frame",
    "freq_warp_max_bins",
    "time_warp_bound",
    "time_warp_max_frames",
    "time_warp_max_ratio",
    "freq_noise_max_stddev",
)

# The paper's policies (Table 1): W time warp, F / mF frequency mask width /
# count, T / p / mT time mask width / upper bound ratio / count.
PRESETS = {
    "LB": dict(time_warp_max_frames=80, freq_mask_max_bins=27, freq_mask_count=1,
               time_mask_max_frames=100, time_mask_max_ratio=1.0, time_mask_count=1),
    "LD": dict(time_warp_max_frames=80, freq_mask_max_bins=27, freq_mask_count=2,
               time_mask_max_frames=100, time_mask_max_ratio=1.0, time_mask_count=2),
    "SM": dict(time_warp_max_frames=40, freq_mask_max_bins=15, freq_mask_count=2,
               time_mask_max_frames=70, time_mask_max_ratio=0.2, time_mask_count=2),
    "SS": dict(time_warp_max_frames=40, freq_mask_max_bins=27, freq_mask_count=2,
               time_mask_max_frames=70, time_mask_max_ratio=0.2, time_mask_count=2),
}  # fmt: skip
for _policy in PRESETS.values():
    _policy["time_warp_max_ratio"] = 1.0  # the paper bounds the warp by W only


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
        u2 = hash_uniform(shape, self.seed, stream + _SPREAD)
        radius = tf.sqrt(-2.0 * tf.math.log(u1))
        return mean + stddev * radius * tf.cos(2.0 * 3.141592653589793 * u2)


def input_seed(x, lengths):
    """int64 [2] seed that is a function of the valid frames of x (and lengths).

    The float bits of every valid value, weighted by its place (utterance,
    frame, feature: not by the padded length), summed (int64 arithmetic
    wraps): the same utterances give the same seed, however padded.
    """
    x = tf.convert_to_tensor(x)
    valid = _expand_like(tf.sequence_mask(lengths, tf.shape(x)[1]), x)
    bits = tf.cast(tf.bitcast(tf.cast(x, tf.float32), tf.int32), tf.int64)
    shape = tf.shape(bits, out_type=tf.int64)
    b = tf.range(shape[0])[:, None]
    t = tf.range(shape[1])[None, :]
    per_frame = tf.reduce_prod(shape[2:])  # values per frame
    frame_start = (b * _SPREAD + t) * per_frame  # [B, T]
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


def _expand_like(mask, x):
    """[B, T] -> broadcastable against x [B, T, ...]."""
    return tf.reshape(mask, tf.concat([tf.shape(mask), [1] * (x.shape.rank - 2)], 0))


def _valid(lengths, size):
    return tf.sequence_mask(lengths, size)


def block_mask(
    draws,
    choose_range,
    size,
    count,
    max_width=None,
    max_ratio=1.0,
    masks_per_frame=0.0,
    stream=0,
):
    """[B, size] float: 0 inside the random blocks, 1 elsewhere.

    Up to `count` blocks per row, each inside [0, choose_range[b]): width
    floor(u * max_width) (max_width None: choose_range * max_ratio), at most
    max(floor(max_ratio * choose_range), 1), start uniform over the places it
    fits. With masks_per_frame > 0 only the first min(count, masks_per_frame
    * choose_range) blocks count.
    """
    batch = tf.shape(choose_range)[0]
    span = tf.cast(choose_range, tf.float32)[:, tf.newaxis]  # [B, 1]
    if max_width is None:
        limit = span * max_ratio
    else:
        limit = tf.fill([batch, 1], float(max_width))
    width = tf.cast(draws.uniform([batch, count], stream) * limit, tf.int32)
    bound = tf.maximum(tf.cast(max_ratio * span, tf.int32), 1)
    width = tf.minimum(width, bound)  # [B, count]
    room = tf.cast(
        tf.cast(choose_range, tf.int32)[:, tf.newaxis] - width + 1, tf.float32
    )
    start = tf.cast(draws.uniform([batch, count], stream + 1) * room, tf.int32)
    position = tf.range(size)[tf.newaxis, tf.newaxis, :]
    inside = (position >= start[..., tf.newaxis]) & (
        position < (start + width)[..., tf.newaxis]
    )  # [B, count, size]
    if masks_per_frame > 0:
        used = tf.cast(tf.range(count), tf.float32)[tf.newaxis] < masks_per_frame * span
        inside &= used[..., tf.newaxis]
    return 1.0 - tf.cast(tf.reduce_any(inside, axis=1), tf.float32)


def warp_positions(draws, choose_range, size, max_shift=None, max_ratio=1.0, stream=0):
    """[B, size] float source positions of a random piecewise-linear warp.

    For each row, an anchor a (uniform in [1, L - 1), L = choose_range[b]) moves
    to d = a + shift, shift uniform in [-max_shift, max_shift] (max_shift
    None: in (-max_ratio L, max_ratio L)) and at most max_ratio * L in
    magnitude, d kept in [1, L - 2]. Output position i takes its value from
    source position s(i), linear on [0, d] and [d, L - 1] with s(0) = 0,
    s(d) = a, s(L - 1) = L - 1 (the first and last frames stay in place), and
    s(i) = i from L on. Rows with L < 3 are not warped.
    """
    batch = tf.shape(choose_range)[0]
    span = tf.cast(choose_range, tf.float32)
    bound = tf.floor(max_ratio * span)
    if max_shift is None:
        shift = tf.floor(draws.uniform([batch], stream, -1.0, 1.0) * bound)
    else:
        shift = tf.floor(
            draws.uniform([batch], stream, -float(max_shift), float(max_shift) + 1.0)
        )
    shift = tf.clip_by_value(shift, -bound, bound)
    last = span - 1.0
    anchor = (
        tf.floor(draws.uniform([batch], stream + 1) * tf.maximum(span - 2.0, 0.0)) + 1
    )
    dest = tf.clip_by_value(anchor + shift, 1.0, tf.maximum(last - 1.0, 1.0))
    i = tf.cast(tf.range(size), tf.float32)[tf.newaxis]  # [1, size]
    a, d, end = anchor[:, None], dest[:, None], last[:, None]
    left = i * a / d
    right = a + (i - d) * (end - a) / tf.maximum(end - d, 1e-6)
    source = tf.where(i < d, left, right)
    warped = (span[:, None] >= 3.0) & (i < span[:, None])
    return tf.where(warped, source, i)


def resample_axis(x, source, axis):
    """x [B, T, F, C] read at fractional positions source [B, n] along axis 1 or 2.

    Linear interpolation between floor and ceil (lingvo's hat-function warp
    matrix, without forming it).
    """
    upper = tf.math.ceil(source)
    w_upper = 1.0 - (upper - source)  # weight of x[ceil(s)]
    size = tf.shape(x)[axis]
    hi = tf.clip_by_value(tf.cast(upper, tf.int32), 0, size - 1)
    lo = tf.clip_by_value(hi - 1, 0, size - 1)
    at_hi = tf.gather(x, hi, axis=axis, batch_dims=1)
    at_lo = tf.gather(x, lo, axis=axis, batch_dims=1)
    shape = [-1, size, 1, 1] if axis == 1 else [-1, 1, size, 1]
    w = tf.reshape(w_upper, shape)
    return w * at_hi + (1.0 - w) * at_lo


def time_warp(
    x, lengths, draws, max_frames, max_ratio, bound="static", stream=TIME_WARP_STREAM
):
    """Warps each utterance along time within its length (see warp_positions).

    bound "static": shifts up to min(max_frames, max_ratio * length);
    "dynamic": up to max_ratio * length.
    """
    if max_ratio <= 0.0 or (bound == "static" and max_frames <= 0):
        return x
    source = warp_positions(
        draws,
        lengths,
        tf.shape(x)[1],
        max_frames if bound == "static" else None,
        max_ratio,
        stream,
    )
    # Selected, not interpolated, past each length: the padding may hold
    # NaN or inf, which a weight of 0 would turn into NaN.
    valid = _expand_like(_valid(lengths, tf.shape(x)[1]), x)
    return tf.where(valid, resample_axis(x, source, axis=1), x)


def frequency_warp(x, lengths, draws, max_bins, stream=FREQ_WARP_STREAM):
    """Warps every frame along frequency by up to max_bins (bins 0, F-1 fixed)."""
    if max_bins <= 0:
        return x
    batch, bins = tf.shape(x)[0], tf.shape(x)[2]
    source = warp_positions(draws, tf.fill([batch], bins), bins, max_bins, 1.0, stream)
    valid = _expand_like(_valid(lengths, tf.shape(x)[1]), x)
    return tf.where(valid, resample_axis(x, source, axis=2), x)


def frequency_noise(
    x, lengths, draws, max_stddev, weight=1.0, stream=FREQ_NOISE_STREAM
):
    """Multiplies each utterance's bins by N(1, s), s ~ U(0, max_stddev * weight)."""
    if max_stddev <= 0.0:
        return x
    batch, bins = tf.shape(x)[0], tf.shape(x)[2]
    stddev = draws.uniform([batch, 1, 1, 1], stream) * (max_stddev * weight)
    scale = 1.0 + stddev * draws.normal([batch, 1, bins, 1], stream + 1)
    valid = _expand_like(_valid(lengths, tf.shape(x)[1]), x)
    return tf.where(valid, x * scale, x)


def time_mask(
    x,
    lengths,
    draws,
    max_frames,
    count,
    max_ratio=1.0,
    dynamic=False,
    masks_per_frame=0.0,
    use_noise=False,
    gaussian_noise=False,
    stream=TIME_MASK_STREAM,
):
    """Zeroes (or fills with noise) up to `count` blocks of frames per utterance.

    Widths up to max_frames (dynamic: up to max_ratio * length) and at most
    max_ratio * length; all blocks inside the utterance. With use_noise the
    blocks hold N(0, s) noise, s = 1 (gaussian_noise) or s = 0.1 * U(1, 2) +
    1e-4 per batch.
    """
    if count <= 0 or max_ratio <= 0.0 or (max_frames <= 0 and not dynamic):
        return x
    size = tf.shape(x)[1]
    keep = block_mask(
        draws,
        lengths,
        size,
        count,
        None if dynamic else max_frames,
        max_ratio,
        masks_per_frame,
        stream,
    )
    masked = _valid(lengths, size) & (keep < 0.5)  # [B, T]
    fill = tf.zeros_like(x)
    if use_noise:
        if gaussian_noise:
            stddev = 1.0
        else:
            stddev = draws.uniform([], stream + 2, 1.0, 2.0) * 0.1 + 0.0001
        noise = draws.normal(tf.shape(x)[:3], stream + 3) * stddev
        fill = tf.broadcast_to(noise[..., tf.newaxis], tf.shape(x))
    return tf.where(_expand_like(masked, x), fill, x)


def frequency_mask(x, lengths, draws, max_bins, count, stream=FREQ_MASK_STREAM):
    """Zeroes up to `count` bands of at most max_bins bins per utterance."""
    if max_bins <= 0 or count <= 0:
        return x
    batch, bins = tf.shape(x)[0], tf.shape(x)[2]
    keep = block_mask(
        draws, tf.fill([batch], bins), bins, count, max_bins, 1.0, 0.0, stream
    )
    valid = _expand_like(_valid(lengths, tf.shape(x)[1]), x)
    return tf.where(valid, x * keep[:, tf.newaxis, :, tf.newaxis], x)


def _check_domain_value(name, value):
    if name == "time_warp_bound":
        if value not in ("static", "dynamic"):
            raise ValueError(f'{name} must be "static" or "dynamic", got {value!r}')
    elif name == "use_dynamic_time_mask_max_frames":
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be a bool, got {value!r}")
    elif name in ("time_mask_max_ratio", "time_warp_max_ratio"):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must lie in [0, 1], got {value!r}")
    elif name in ("time_masks_per_frame", "freq_noise_max_stddev"):
        if not value >= 0.0:
            raise ValueError(f"{name} must be >= 0, got {value!r}")
    elif not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")


def _check_domain_ids(domain_ids, x):
    """int32 [B] domain_ids, checked against x's batch (errors name them)."""
    domain_ids = tf.convert_to_tensor(domain_ids)
    if not domain_ids.dtype.is_integer:
        raise ValueError(
            f"domain_ids must be integers, got dtype {domain_ids.dtype.name}"
        )
    if domain_ids.shape.rank != 1:
        raise ValueError(f"domain_ids must be [B], got shape {domain_ids.shape}")
    if None not in (domain_ids.shape[0], x.shape[0]) and (
        domain_ids.shape[0] != x.shape[0]
    ):
        raise ValueError(
            f"domain_ids has {domain_ids.shape[0]} entries for a batch of {x.shape[0]}"
        )
    check = require(
        tf.equal(tf.size(domain_ids), tf.shape(x)[0]),
        "domain_ids has {} entries for a batch of {}",
        tf.size(domain_ids),
        tf.shape(x)[0],
    )
    domain_ids = tf.cast(domain_ids, tf.int32)
    with after(check):
        return tf.identity(domain_ids)


@keras.saving.register_keras_serializable(package="tf_transducer")
class SpecAugment(ListLengths, keras.layers.Layer):
    """SpecAugment as a Keras layer, with every option of lingvo's augmenter.

    In training, per utterance and within its length only: frequency warp,
    time warp, frequency noise, time masks, frequency masks (in that order);
    identity otherwise (and so in an exported inference model).

    float32 only, under any dtype policy, like the feature layers before it
    (mixed precision starts after the front end).

    Args:
      freq_mask_max_bins, freq_mask_count: frequency masks (width < max bins).
      time_mask_max_frames, time_mask_count: time masks (width < max frames).
      time_mask_max_ratio: time masks are at most this share of the length.
      use_dynamic_time_mask_max_frames: widths up to time_mask_max_ratio *
        length instead of time_mask_max_frames.
      time_masks_per_frame: if > 0, an utterance of n frames gets
        min(time_mask_count, time_masks_per_frame * n) masks.
      freq_warp_max_bins: frequency warp (0: none).
      time_warp_bound: "static" (shift <= min(time_warp_max_frames,
        time_warp_max_ratio * length)) or "dynamic" (<= time_warp_max_ratio *
        length).
      time_warp_max_frames, time_warp_max_ratio: time warp (either 0: none,
        for a static bound).
      use_noise: fill time masks with noise instead of zeros; gaussian_noise:
        N(0, 1) noise, else N(0, s) with s = 0.1 * U(1, 2) + 1e-4.
      freq_noise_max_stddev: multiply each utterance's bins by N(1, s),
        s ~ U(0, max); freq_noise_warmup_steps: s ramps up linearly over this
        many training steps (the `step` call argument, e.g. the optimizer's
        `iterations`, or else the layer's own count of training calls).
      start_step: features pass unchanged until this training step (same
        count as above): a model trained from scratch first learns to align
        clean features (0: augment from the first step).
      unstack, stack_height: features of stack_height stacked frames
        ([B, T, stack_height * F]) are unstacked to [B, stack_height * T, F]
        for the augmentation and restacked after.
      domain_ids: the domains to augment; any parameter above may then be a
        list with one value per domain (in this order). Utterances of other
        domains pass unchanged.
      use_input_dependent_random_seed: stateless random ops seeded from the
        batch's own values: the same input gives the same augmentation.
      seed: seed of the layer's `keras.random.SeedGenerator` (reproducible
        runs); ignored with input-dependent seeds.

    Call arguments:
      features: float [B, T, F] or [B, T, F, C] (integer features are a
        ValueError); in training finite within each length (NaN or inf
        there, which warps would spread and masks hide, is an
        InvalidArgumentError; the padding may hold anything).
      lengths: optional int [B] frames (else the Keras mask, else T).
      domain_ids: optional int [B], each utterance's domain (needed when
        `domain_ids` has several entries).
      training: augment only when True.
      step: optional int scalar training step for the noise warm-up and
        start_step.

    Returns:
      The augmented features, same shape and dtype.

    Example:
    ```python
    augment = SpecAugment.from_preset("LD", seed=1)
    x = augment(features, feature_lengths, training=True)
    ```
    """

    def __init__(
        self,
        freq_mask_max_bins=15,
        freq_mask_count=1,
        use_dynamic_time_mask_max_frames=False,
        time_mask_max_frames=50,
        time_mask_count=1,
        time_mask_max_ratio=1.0,
        time_masks_per_frame=0.0,
        freq_warp_max_bins=0,
        time_warp_bound="static",
        time_warp_max_frames=0,
        time_warp_max_ratio=0.0,
        use_noise=False,
        gaussian_noise=False,
        freq_noise_max_stddev=0.0,
        freq_noise_warmup_steps=0,
        start_step=0,
        unstack=False,
        stack_height=3,
        domain_ids=(0,),
        use_input_dependent_random_seed=False,
        seed=None,
        **kwargs,
    ):
        arguments = locals()
        # Float32 only, as the feature layers before it (mixed precision
        # starts after the front end).
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.supports_masking = True
        domain_ids = list(domain_ids)
        if not domain_ids or any(
            not isinstance(d, int) or isinstance(d, bool) for d in domain_ids
        ):
            raise ValueError(
                f"domain_ids must be a non-empty list of ints, got {domain_ids}"
            )
        if len(set(domain_ids)) != len(domain_ids):
            raise ValueError(f"domain_ids must not repeat, got {domain_ids}")
        given = {name: arguments[name] for name in PER_DOMAIN}
        self._domain_params = [{} for _ in domain_ids]
        for name, value in given.items():
            if isinstance(value, (list, tuple)):
                if len(value) != len(domain_ids):
                    raise ValueError(
                        f"{name} has {len(value)} values but domain_ids has "
                        f"{len(domain_ids)} domains"
                    )
                values = list(value)
            else:
                values = [value] * len(domain_ids)
            for i, v in enumerate(values):
                _check_domain_value(name, v)
                self._domain_params[i][name] = v
            setattr(self, name, value if not isinstance(value, tuple) else list(value))
        for name, value, least in (
            ("freq_noise_warmup_steps", freq_noise_warmup_steps, 0),
            ("start_step", start_step, 0),
            ("stack_height", stack_height, 1),
        ):
            if not isinstance(value, int) or value < least:
                raise ValueError(f"{name} must be an int >= {least}, got {value!r}")
        self.use_noise = bool(use_noise)
        self.gaussian_noise = bool(gaussian_noise)
        self.freq_noise_warmup_steps = freq_noise_warmup_steps
        self.start_step = start_step
        self.unstack = bool(unstack)
        self.stack_height = stack_height
        self.domain_ids = domain_ids
        self.use_input_dependent_random_seed = bool(use_input_dependent_random_seed)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.step = None

    @classmethod
    def from_preset(cls, name, **overrides):
        """A layer with one of the paper's policies: "LB", "LD", "SM", "SS"."""
        if name not in PRESETS:
            raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {name!r}")
        return cls(**{**PRESETS[name], **overrides})

    @classmethod
    def from_arg(cls, augment):
        """The layer of a model's `augment` argument.

        The argument is None (no layer), a preset name or a dict of arguments.
        """
        if augment is None:
            return None
        if isinstance(augment, str):
            return cls.from_preset(augment)
        if not isinstance(augment, dict):
            raise ValueError(
                "augment must be None, a preset name or a dict of SpecAugment "
                f"arguments, got {augment!r}"
            )
        return cls(**augment)

    def build(self, features_shape, *args, **kwargs):
        rank = len(features_shape)
        if rank not in (3, 4):
            raise ValueError(
                "features must be [B, T, F] or [B, T, F, C], got shape "
                f"{features_shape}"
            )
        if (
            self.unstack
            and features_shape[2] is not None
            and (features_shape[2] % self.stack_height)
        ):
            raise ValueError(
                f"unstack: the feature size {features_shape[2]} is not a multiple "
                f"of stack_height={self.stack_height}"
            )
        if self.freq_noise_warmup_steps or self.start_step:
            self.step = self.add_weight(
                shape=(),
                initializer="zeros",
                dtype="int64",
                trainable=False,
                name="step",
            )

    def call(
        self,
        features,
        lengths=None,
        domain_ids=None,
        training=None,
        step=None,
        mask=None,
    ):
        features = float_values(features, "features")
        if lengths is None and mask is not None:
            lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
        lengths = resolve_lengths(features, lengths)
        if not training:
            return features
        x = finite_within(tf.cast(features, tf.float32), lengths, "features")
        if x.shape.rank == 3:
            x = x[..., tf.newaxis]
        if self.use_input_dependent_random_seed:
            draws = Draws(seed=input_seed(x, lengths))
        else:
            draws = Draws(self.seed_generator)
        step, earlier = self._training_step(step)
        weight = self._noise_weight(step)
        if len(self.domain_ids) == 1 and domain_ids is None:
            out = self._augment(x, lengths, draws, self._domain_params[0], weight)
        else:
            if domain_ids is None:
                raise ValueError(
                    f"the layer augments domains {self.domain_ids}: pass domain_ids [B]"
                )
            domain_ids = _check_domain_ids(domain_ids, x)
            out = x
            for i, domain in enumerate(self.domain_ids):
                augmented = self._augment(
                    x, lengths, draws, self._domain_params[i], weight
                )
                chosen = tf.reshape(tf.equal(domain_ids, domain), [-1, 1, 1, 1])
                out = tf.where(chosen, augmented, out)
        if self.start_step:
            out = tf.where(earlier >= self.start_step, out, x)
        if features.shape.rank == 3:
            out = out[..., 0]
        return tf.cast(out, features.dtype)

    def _training_step(self, step):
        """(this call's step for the noise warm-up, training steps taken before it).

        From `step` (e.g. the optimizer's iterations), else from the layer's
        count of training calls; (None, None) without warm-ups.
        """
        if not (self.freq_noise_warmup_steps or self.start_step):
            return None, None
        if step is None:
            self.step.assign_add(1)
            count = tf.cast(self.step, tf.int64)
            return count, count - 1
        return step, tf.cast(step, tf.int64)

    def _noise_weight(self, step):
        if not self.freq_noise_warmup_steps:
            return 1.0
        step = tf.cast(step, tf.float32)
        warmup = float(self.freq_noise_warmup_steps)
        return tf.minimum(step, warmup) / warmup

    def _augment(self, x, lengths, draws, params, weight):
        if self.unstack:
            shape = tf.shape(x)
            h = self.stack_height
            x = tf.reshape(x, [shape[0], shape[1] * h, shape[2] // h, shape[3]])
            lengths = lengths * h
        x = frequency_warp(x, lengths, draws, params["freq_warp_max_bins"])
        x = time_warp(
            x,
            lengths,
            draws,
            params["time_warp_max_frames"],
            params["time_warp_max_ratio"],
            params["time_warp_bound"],
        )
        x = frequency_noise(x, lengths, draws, params["freq_noise_max_stddev"], weight)
        x = time_mask(
            x,
            lengths,
            draws,
            params["time_mask_max_frames"],
            params["time_mask_count"],
            params["time_mask_max_ratio"],
            params["use_dynamic_time_mask_max_frames"],
            params["time_masks_per_frame"],
            self.use_noise,
            self.gaussian_noise,
        )
        x = frequency_mask(
            x, lengths, draws, params["freq_mask_max_bins"], params["freq_mask_count"]
        )
        if self.unstack:
            x = tf.reshape(x, shape)
        return x

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, features_shape, *args, **kwargs):
        return features_shape

    def get_config(self):
        config = super().get_config()
        for name in PER_DOMAIN:
            config[name] = getattr(self, name)
        config.update(
            use_noise=self.use_noise,
            gaussian_noise=self.gaussian_noise,
            freq_noise_warmup_steps=self.freq_noise_warmup_steps,
            start_step=self.start_step,
            unstack=self.unstack,
            stack_height=self.stack_height,
            domain_ids=list(self.domain_ids),
            use_input_dependent_random_seed=self.use_input_dependent_random_seed,
            seed=self.seed,
        )
        return config
