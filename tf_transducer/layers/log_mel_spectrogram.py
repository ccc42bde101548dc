# SPDX-License-Identifier: Apache-2.0
"""LogMelSpectrogram: audio -> log mel filterbank energies, padding-aware."""

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
class LogMelSpectrogram(SpectralLayer):
    """Log mel spectrogram of padded audio, as a Keras layer (TFLite built-ins).

    For each frame of `frame_length_ms` every `frame_step_ms` (no padding:
    a signal of n samples has 1 + (n - frame) // step frames, or none):

        power[k] = |RFFT_fft_length(hann_periodic * frame)[k]|^2
        floor = sum_k power[k] * 10^(-dynamic_range_db / 10)
        features[m] = log(sum_k power[k] mel[k, m] + log_offset + floor)

    with HTK triangular mel filters evenly spaced in mel over [f_min, f_max]
    (`tf.signal.linear_to_mel_weight_matrix`'s construction).

    The floor relative to the frame's energy is what makes the Keras layer
    and its TFLite program agree (within 1e-4, typically 3e-5) on any
    16-bit recording: bands more than ~60 dB below their frame hold only
    float32 FFT rounding noise, which differs between TF's and TFLite's
    FFTs (up to 1e-3 in the log without the floor: band-limited, clipped
    or DC-offset audio). `dynamic_range_db=None` drops it (log(mel +
    log_offset) exactly, as `tf.signal` examples compute).

    float32 only, under any dtype policy: half-precision FFTs and logs would
    not keep that accuracy (a mixed-precision model casts the features after).

    Args:
      sample_rate: Hz of the input audio.
      frame_length_ms, frame_step_ms: window and hop.
      fft_length: FFT size; default the next power of two >= the window.
      n_mels: mel bands.
      f_min, f_max: band edges in Hz (f_max default: sample_rate / 2).
      log_offset: added before the log (what digital silence gives).
      dynamic_range_db: bands are floored at this many dB below their
        frame's spectral energy (None: no floor).

    Call arguments:
      audio: float [B, N] samples in [-1, 1], padded; finite within each
        length (NaN or inf there is an InvalidArgumentError, the padding may
        hold anything). Integer samples are a ValueError: scale int16 PCM
        by 1 / 32768 first.
      lengths: optional int [B] samples of each signal (default: N).

    Returns:
      (features [B, T, n_mels], frame lengths [B]); frames past an
      utterance's own length are 0, so padding never changes its features.

    Example:
    ```python
    features, frames = LogMelSpectrogram(n_mels=80)(audio, audio_lengths)
    ```
    """

    def __init__(
        self, sample_rate: int = 16000, frame_length_ms: float = 25.0,
        frame_step_ms: float = 10.0, fft_length: int | None = None, n_mels: int = 80,
        f_min: float = 0.0, f_max: float | None = None, log_offset: float = 1e-6,
        dynamic_range_db: float | None = 60.0, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(
            sample_rate,
            frame_length_ms,
            frame_step_ms,
            fft_length,
            dynamic_range_db,
            **kwargs,
        )
        check_positive("n_mels", n_mels, int)
        check_positive("log_offset", log_offset)
        self.f_max = self._check_band(f_min, f_max)
        self.f_min = f_min
        self.n_mels = n_mels
        self.log_offset = log_offset
        self._mel = _dsp.triangular_mel_weights(
            self.fft_length // 2 + 1, sample_rate, n_mels, f_min, self.f_max
        ).astype(np.float32)

    def call(
        self, audio: TensorLike, lengths: TensorLike | None = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        power, frames = self._power_spectrum(audio, lengths)
        mel = tf.matmul(power, tf.constant(self._mel))
        features = tf.math.log(mel + self.log_offset + self._energy_floor(power))
        return _dsp.zero_after(features, frames), frames

    @property
    def feature_size(self) -> int:
        return self.n_mels

    def get_config(self) -> dict[str, Any]:
        return with_attributes(
            super().get_config(), self, "n_mels", "f_min", "f_max", "log_offset"
        )
