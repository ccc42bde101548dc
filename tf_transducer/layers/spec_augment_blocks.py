# SPDX-License-Identifier: Apache-2.0
"""SpecAugment's building blocks: warps, masks and noise, usable on their own.

Shapes: features x [B, T, F, C] (or [B, T, F]); lengths [B] frames. Every
block leaves the frames at and after an utterance's length (its padding)
exactly as they were, and a zero-length utterance unchanged. Random numbers
come from a `Draws` (`tf_transducer.layers.random_draws`); each block draws
from its own stream numbers.
"""

import tensorflow as tf

from tf_transducer.layers.random_draws import expand_like

# Each block draws from its own streams (stream, stream + 1, ...), so that
# switching one block off leaves the others' numbers unchanged.
TIME_MASK_STREAM = 10
FREQ_MASK_STREAM = 20
TIME_WARP_STREAM = 30
FREQ_WARP_STREAM = 40
FREQ_NOISE_STREAM = 50


def _valid(lengths, size):
    return tf.sequence_mask(lengths, size)


def block_mask(
    draws, choose_range, size, count, max_width=None, max_ratio=1.0,
    masks_per_frame=0.0, stream=0,
):  # fmt: skip
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
    valid = expand_like(_valid(lengths, tf.shape(x)[1]), x)
    return tf.where(valid, resample_axis(x, source, axis=1), x)


def frequency_warp(x, lengths, draws, max_bins, stream=FREQ_WARP_STREAM):
    """Warps every frame along frequency by up to max_bins (bins 0, F-1 fixed)."""
    if max_bins <= 0:
        return x
    batch, bins = tf.shape(x)[0], tf.shape(x)[2]
    source = warp_positions(draws, tf.fill([batch], bins), bins, max_bins, 1.0, stream)
    valid = expand_like(_valid(lengths, tf.shape(x)[1]), x)
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
    valid = expand_like(_valid(lengths, tf.shape(x)[1]), x)
    return tf.where(valid, x * scale, x)


def time_mask(
    x, lengths, draws, max_frames, count, max_ratio=1.0, dynamic=False,
    masks_per_frame=0.0, use_noise=False, gaussian_noise=False, stream=TIME_MASK_STREAM,
):  # fmt: skip
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
    return tf.where(expand_like(masked, x), fill, x)


def frequency_mask(x, lengths, draws, max_bins, count, stream=FREQ_MASK_STREAM):
    """Zeroes up to `count` bands of at most max_bins bins per utterance."""
    if max_bins <= 0 or count <= 0:
        return x
    batch, bins = tf.shape(x)[0], tf.shape(x)[2]
    keep = block_mask(
        draws, tf.fill([batch], bins), bins, count, max_bins, 1.0, 0.0, stream
    )
    valid = expand_like(_valid(lengths, tf.shape(x)[1]), x)
    return tf.where(valid, x * keep[:, tf.newaxis, :, tf.newaxis], x)
