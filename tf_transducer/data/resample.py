# SPDX-License-Identifier: Apache-2.0
"""Band-limited resampling of audio, in float64 numpy.

y[n] = sum_k x[k] h(n * rate_in / rate_out - k), where h is a Kaiser-windowed
sinc low-pass at 0.5 * min(rate_in, rate_out) * `rolloff` Hz:

    h(tau) = 2 fc sinc(2 fc tau) I0(beta sqrt(1 - (tau / L)^2)) / I0(beta)

for |tau| < L = zero_crossings / (2 fc) input samples (fc in cycles per input
sample), 0 beyond. Samples outside the signal count as 0. The output has
ceil(len(x) * rate_out / rate_in) samples. Only the rate ratio reduced by
their gcd matters: its `up` phases of h are computed once.

This runs in numpy (the tf.data pipeline calls it through tf.numpy_function
when a file's rate differs from the model's); float64 throughout, so that the
bundled corpus script reproduces its files byte for byte.
"""

import math

import numpy as np


def resample(
    audio: np.ndarray, rate_in: int, rate_out: int, zero_crossings: int = 16,
    rolloff: float = 0.94, beta: float = 8.6,
) -> np.ndarray:  # fmt: skip
    """Resamples audio [N] or [N, channels] from rate_in to rate_out (Hz).

    Args:
      audio: float [N] or [N, C] samples.
      rate_in: the sample rate of audio, a positive int.
      rate_out: the sample rate of the result, a positive int.
      zero_crossings: sinc zero crossings on each side of the filter.
      rolloff: pass band, as a fraction of the lower Nyquist frequency.
      beta: Kaiser window shape (8.6: about 80 dB stop-band attenuation).

    Returns:
      float64 [ceil(N * rate_out / rate_in)] (or [.., C]).
    """
    for name, rate in (("rate_in", rate_in), ("rate_out", rate_out)):
        if not isinstance(rate, (int, np.integer)) or rate <= 0:
            raise ValueError(f"{name} must be a positive int, got {rate!r}")
    x = np.asarray(audio, np.float64)
    if x.ndim not in (1, 2):
        raise ValueError(f"audio must be [N] or [N, channels], got shape {x.shape}")
    if rate_in == rate_out:
        return x.copy()
    g = math.gcd(int(rate_in), int(rate_out))
    up, down = int(rate_out) // g, int(rate_in) // g
    n_in = x.shape[0]
    n_out = -(-n_in * up // down)
    fc = 0.5 * min(1.0, up / down) * rolloff  # cycles per input sample
    half = zero_crossings / (2 * fc)
    width = int(math.ceil(half))
    # Filter bank: phase p (output n with n % up == p) sits at offset
    # (p * down % up) / up past input sample floor(n * down / up).
    frac = (np.arange(up) * down % up) / up  # [up]
    k = np.arange(-width + 1, width + 1)  # [2 width] taps around floor(t)
    tau = frac[:, None] - k[None, :]  # [up, 2 width]
    inside = np.abs(tau) < half
    window = np.i0(beta * np.sqrt(np.clip(1 - (tau / half) ** 2, 0, None))) / np.i0(
        beta
    )
    bank = np.where(inside, 2 * fc * np.sinc(2 * fc * tau) * window, 0.0)
    n = np.arange(n_out)
    base = n * down // up  # floor(t)
    padded = np.pad(x, [(width, width + 1)] + [(0, 0)] * (x.ndim - 1))
    # Rows base + k + width of padded are the taps of output n.
    taps = np.lib.stride_tricks.sliding_window_view(padded, 2 * width, axis=0)
    if x.ndim == 1:
        return np.einsum("nk,nk->n", taps[base + 1], bank[n % up])
    return np.einsum("nck,nk->nc", taps[base + 1], bank[n % up])
