# SPDX-License-Identifier: Apache-2.0
"""Signal-processing pieces shared by the feature layers.

Filterbanks and transforms are built once in float64 numpy (layer
constants); the per-call work is TF ops that TFLite runs as built-ins
(framing, RFFT, matmul, log).
"""

import math

import numpy as np
import tensorflow as tf


def samples(ms, sample_rate):
    """Milliseconds -> samples, rounded to the nearest integer."""
    return int(round(ms * sample_rate / 1000.0))


def next_power_of_two(n):
    return 1 << max(0, math.ceil(math.log2(n)))


def frame_count(lengths, frame_length, frame_step):
    """Whole frames in each signal: 1 + (n - frame_length) // step, or 0."""
    lengths = tf.cast(lengths, tf.int32)
    full = (lengths - frame_length) // frame_step + 1
    return tf.where(lengths >= frame_length, full, tf.zeros_like(full))


def zero_after(x, lengths):
    """x [B, T, ...] with frames t >= lengths[b] set to 0.

    Selected, not multiplied: NaN or inf in the padding does not leak.
    """
    mask = tf.sequence_mask(lengths, tf.shape(x)[1])
    mask = tf.reshape(mask, tf.concat([tf.shape(mask), [1] * (x.shape.rank - 2)], 0))
    return tf.where(mask, x, tf.zeros_like(x))


def power_spectrum(audio, frame_length, frame_step, fft_length):
    """|RFFT(periodic Hann window * frame)|^2: [B, N] -> [B, T, fft_length/2 + 1].

    T = 1 + (N - frame_length) // frame_step, or 0 when N < frame_length.
    """
    n = tf.shape(audio)[1]
    frames_in_n = tf.maximum(n - frame_length, -frame_step) // frame_step + 1
    # At least one frame is computed (an empty RFFT fails), then sliced off.
    audio = tf.pad(audio, [[0, 0], [0, tf.maximum(frame_length - n, 0)]])
    frames = tf.signal.frame(audio, frame_length, frame_step, pad_end=False)
    window = tf.signal.hann_window(frame_length, periodic=True, dtype=audio.dtype)
    # Zero-padded to the FFT length here, as the RFFT would pad it: its
    # kernel refuses frames shorter than fft_length in an empty batch.
    windowed = tf.pad(frames * window, [[0, 0], [0, 0], [0, fft_length - frame_length]])
    spectrum = tf.signal.rfft(windowed, fft_length=[fft_length])
    power = tf.math.square(tf.math.real(spectrum)) + tf.math.square(
        tf.math.imag(spectrum)
    )
    return power[:, :frames_in_n]


def hz_to_mel(hz):
    """The HTK mel scale: 1127 ln(1 + f / 700)."""
    return 1127.0 * np.log1p(np.asarray(hz, np.float64) / 700.0)


def triangular_mel_weights(num_bins, sample_rate, n_mels, f_min, f_max):
    """[num_bins, n_mels]: HTK triangles evenly spaced in mel over [f_min, f_max].

    Band m rises from edge m to edge m + 1 and falls to edge m + 2 (n_mels + 2
    edges); the weight of linear bin k is the triangle at its centre frequency
    k * sample_rate / (2 (num_bins - 1)). The DC bin gets no weight.
    """
    edges = np.linspace(hz_to_mel(f_min), hz_to_mel(f_max), n_mels + 2)
    bin_mel = hz_to_mel(np.linspace(0.0, sample_rate / 2.0, num_bins))[:, None]
    lower, centre, upper = edges[:-2], edges[1:-1], edges[2:]
    rising = (bin_mel - lower) / (centre - lower)
    falling = (upper - bin_mel) / (upper - centre)
    weights = np.maximum(0.0, np.minimum(rising, falling))
    weights[0] = 0.0
    return weights


def band_mapped_mel_weights(num_bins, sample_rate, channels, f_lower, f_upper):
    """[num_bins, channels]: the filterbank of TensorFlow's Mfcc op.

    channels + 1 centres sit at mel_low + (i + 1) * spacing, with spacing =
    (mel_high - mel_low) / (channels + 1). Each bin k in [start, end] (start =
    floor(1.5 + f_lower / hz_per_bin): DC is never used; end = floor(f_upper /
    hz_per_bin)) lies between two consecutive centres c - 1 and c and splits
    its magnitude between those channels linearly in mel: w to channel c - 1
    and 1 - w to channel c, where w = (centre[c] - mel(k)) / (centre[c] -
    centre[c - 1]) (below the first centre, against mel_low). Applied to
    magnitudes (square roots of powers).
    """
    mel_low, mel_high = hz_to_mel(f_lower), hz_to_mel(f_upper)
    spacing = (mel_high - mel_low) / (channels + 1)
    centres = mel_low + spacing * np.arange(1, channels + 2)
    hz_per_bin = 0.5 * sample_rate / (num_bins - 1)
    start = int(1.5 + f_lower / hz_per_bin)
    end = int(f_upper / hz_per_bin)
    weights = np.zeros((num_bins, channels))
    for k in range(start, min(end, num_bins - 1) + 1):
        mel = hz_to_mel(k * hz_per_bin)
        c = int(np.searchsorted(centres[:channels], mel, side="left"))
        left = centres[c - 1] if c > 0 else mel_low
        w = (centres[c] - mel) / (centres[c] - left)
        if c > 0:
            weights[k, c - 1] = w
        if c < channels:
            weights[k, c] = 1.0 - w
    return weights


def mfcc_dct(n_in, n_out):
    """[n_in, n_out]: the DCT-II of TensorFlow's Mfcc op.

    sqrt(2 / n_in) cos(pi / n_in * (j + 0.5) * i), with no separate scaling of
    coefficient 0.
    """
    j = np.arange(n_in)[:, None]
    i = np.arange(n_out)[None, :]
    return math.sqrt(2.0 / n_in) * np.cos(math.pi / n_in * (j + 0.5) * i)
