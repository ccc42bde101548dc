# SPDX-License-Identifier: Apache-2.0
"""float64 numpy references of the feature layers, written from their formulas."""

import math

import numpy as np


def frames_of(audio, frame_length, step):
    n = 1 + (len(audio) - frame_length) // step if len(audio) >= frame_length else 0
    frames = [audio[i * step : i * step + frame_length] for i in range(n)]
    return np.array(frames).reshape(n, frame_length)


def power_spectrum(audio, frame_length, step, fft_length):
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(frame_length) / frame_length)
    spectrum = np.fft.rfft(frames_of(audio, frame_length, step) * window, n=fft_length)
    return np.abs(spectrum) ** 2


def energy_floor(power, dynamic_range_db):
    """[T, 1]: each frame's energy 10^(-dynamic_range_db / 10) below it (or 0)."""
    if dynamic_range_db is None:
        return np.zeros((len(power), 1))
    return power.sum(axis=1, keepdims=True) * 10.0 ** (-dynamic_range_db / 10.0)


def log_mel(audio, mel_matrix, frame_length, step, fft_length, offset,
            dynamic_range_db=60.0):  # fmt: skip
    power = power_spectrum(
        np.asarray(audio, np.float64), frame_length, step, fft_length
    )
    return np.log(power @ mel_matrix + offset + energy_floor(power, dynamic_range_db))


def tf_mfcc_filterbank(num_bins, rate, channels, lower, upper):
    """The Mfcc op's filterbank, bin by bin as its band mapper walks them."""

    def mel(f):
        return 1127.0 * math.log1p(f / 700.0)

    mel_low, mel_high = mel(lower), mel(upper)
    spacing = (mel_high - mel_low) / (channels + 1)
    centre = [mel_low + spacing * (i + 1) for i in range(channels + 1)]
    hz_per_bin = 0.5 * rate / (num_bins - 1)
    start, end = int(1.5 + lower / hz_per_bin), int(upper / hz_per_bin)
    bank = np.zeros((num_bins, channels))
    channel = 0
    for i in range(num_bins):
        if i < start or i > end:
            continue
        m = mel(i * hz_per_bin)
        while channel < channels and centre[channel] < m:
            channel += 1
        below = channel - 1
        if below >= 0:
            w = (centre[below + 1] - m) / (centre[below + 1] - centre[below])
            bank[i, below] += w
        else:
            w = (centre[0] - m) / (centre[0] - mel_low)
        if below + 1 < channels:
            bank[i, below + 1] += 1 - w
    return bank


def mfcc(audio, rate=16000, frame_length=512, step=320, channels=40, n_out=26,
         lower=20.0, upper=8000.0, dynamic_range_db=60.0):  # fmt: skip
    power = power_spectrum(np.asarray(audio, np.float64), frame_length, step, 512)
    bank = np.sqrt(power) @ tf_mfcc_filterbank(
        power.shape[1], rate, channels, lower, upper
    )
    floor = np.sqrt(energy_floor(power, dynamic_range_db))
    logs = np.log(np.maximum(bank, np.maximum(floor, 1e-12)))
    dct = np.array(
        [
            [math.sqrt(2 / channels) * math.cos(math.pi / channels * (j + 0.5) * i)
             for i in range(n_out)]
            for j in range(channels)
        ]
    )  # fmt: skip
    return logs @ dct


def stack_frames(x, length, left, right, stride):
    """x [T, F] -> [ceil(length / stride), (left + 1 + right) F]."""
    out = []
    for c in range(0, length, stride):
        row = [
            x[t] if 0 <= t < length else np.zeros(x.shape[1])
            for t in range(c - left, c + right + 1)
        ]
        out.append(np.concatenate(row))
    return np.array(out).reshape(-1, (left + 1 + right) * x.shape[1])
