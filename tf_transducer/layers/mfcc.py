# SPDX-License-Identifier: Apache-2.0
"""Mfcc: audio -> mel-frequency cepstral coefficients, DeepSpeech's by default."""

from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import check_positive
from tf_transducer._checks import with_attributes
from tf_transducer.layers import _dsp
from tf_transducer.layers._feature_base import SpectralLayer


@keras.saving.register_keras_serializable(package="tf_transducer")
class Mfcc(SpectralLayer):
    """MFCCs of padded audio, as a Keras layer (TFLite built-ins).

    The computation of TensorFlow's AudioSpectrogram + Mfcc ops, which
    DeepSpeech 0.9 feeds its model with; the defaults are its preset (16 kHz,
    32 ms windows every 20 ms, 26 coefficients from 40 channels over
    20 Hz - 8 kHz). Per frame:

        magnitude[k] = |RFFT_fft_length(hann_periodic * frame)[k]|
        bank[c] = sum_k magnitude[k] W[k, c]      (W: the Mfcc op's filterbank,
                                                   `_dsp.band_mapped_mel_weights`)
        floor = sqrt(sum_k magnitude[k]^2 * 10^(-dynamic_range_db / 10))
        logs[c] = log(max(bank[c], 1e-12, floor))
        mfcc[i] = sum_c logs[c] sqrt(2 / C) cos(pi / C (c + 1/2) i)

    The floor relative to the frame's energy keeps the Keras layer and its
    TFLite program within 1e-4 of each other on any 16-bit recording:
    channels more than ~60 dB below their frame hold float32 FFT rounding
    noise that TF's and TFLite's FFTs do not share (constant, DC-offset
    frames differed by 2 in c0 without it). Above the floor the values are
    the Mfcc op's; `dynamic_range_db=None` gives the op's exactly.

    float32 only, under any dtype policy (as `LogMelSpectrogram`).

    Args:
      sample_rate: Hz of the input audio.
      frame_length_ms, frame_step_ms: window and hop (DeepSpeech: 32, 20).
      fft_length: FFT size; default the next power of two >= the window.
      n_coefficients: cepstral coefficients kept (DeepSpeech's n_input: 26).
      filterbank_channels: mel channels before the DCT (40).
      f_min, f_max: filterbank limits in Hz (20, sample_rate / 2).
      dynamic_range_db: channels are floored at this many dB below their
        frame's spectral energy (None: the Mfcc op's 1e-12 floor only).

    Call arguments:
      audio, lengths: as `LogMelSpectrogram`'s (float [B, N] samples in
        [-1, 1], finite within each length; optional int [B] lengths).

    Returns:
      (mfccs [B, T, n_coefficients], frame lengths [B]), 0 past each length.
    """

    def __init__(
        self, sample_rate: int = 16000, frame_length_ms: float = 32.0,
        frame_step_ms: float = 20.0, fft_length: int | None = None,
        n_coefficients: int = 26, filterbank_channels: int = 40, f_min: float = 20.0,
        f_max: float | None = None, dynamic_range_db: float | None = 60.0,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(
            sample_rate,
            frame_length_ms,
            frame_step_ms,
            fft_length,
            dynamic_range_db,
            **kwargs,
        )
        check_positive("filterbank_channels", filterbank_channels, int)
        check_positive("n_coefficients", n_coefficients, int)
        if n_coefficients > filterbank_channels:
            raise ValueError(
                f"n_coefficients ({n_coefficients}) must be <= filterbank_channels "
                f"({filterbank_channels})"
            )
        self.f_max = self._check_band(f_min, f_max)
        self.f_min = f_min
        self.n_coefficients = n_coefficients
        self.filterbank_channels = filterbank_channels
        bank = _dsp.band_mapped_mel_weights(
            self.fft_length // 2 + 1,
            sample_rate,
            filterbank_channels,
            f_min,
            self.f_max,
        )
        self._bank = bank.astype(np.float32)
        self._dct = _dsp.mfcc_dct(filterbank_channels, n_coefficients).astype(
            np.float32
        )

    def call(
        self, audio: TensorLike, lengths: TensorLike | None = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        power, frames = self._power_spectrum(audio, lengths)
        bank = tf.matmul(tf.sqrt(power), tf.constant(self._bank))
        floor = tf.maximum(tf.sqrt(self._energy_floor(power)), 1e-12)
        cepstrum = tf.matmul(
            tf.math.log(tf.maximum(bank, floor)), tf.constant(self._dct)
        )
        return _dsp.zero_after(cepstrum, frames), frames

    @property
    def feature_size(self) -> int:
        return self.n_coefficients

    def get_config(self) -> dict[str, Any]:
        return with_attributes(
            super().get_config(), self, "n_coefficients", "filterbank_channels",
            "f_min", "f_max",
        )  # fmt: skip
