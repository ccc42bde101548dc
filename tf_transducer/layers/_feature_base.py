# SPDX-License-Identifier: Apache-2.0
"""What the feature layers share: (values, lengths) in, (values, lengths) out."""

import math
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tf_transducer._checks import after
from tf_transducer._checks import check_positive
from tf_transducer._checks import finite_within
from tf_transducer._checks import float_values
from tf_transducer._checks import in_xla_context
from tf_transducer._checks import refuse
from tf_transducer._checks import resolve_lengths
from tf_transducer._checks import with_attributes
from tf_transducer.layers import _dsp
from tf_transducer.layers._checks import ListLengths
from tf_transducer.layers._checks import OutputShape
from tf_transducer.layers._checks import Shape
from tf_transducer.layers._checks import TracedOutputSpec

_PCM_HINT = (
    "; the layers read float samples in [-1, 1]: scale int16 PCM by 1 / 32768 "
    "first (tf.cast(audio, tf.float32) / 32768)"
)


class SpectralLayer(TracedOutputSpec, ListLengths, keras.layers.Layer):
    """Base of the spectrum-based feature layers: framing and power spectrum.

    A signal of n samples has 1 + (n - frame) // step frames (none when
    n < frame); each is windowed (periodic Hann) and transformed (RFFT of
    fft_length, default the next power of two >= the frame).
    """

    def __init__(
        self, sample_rate: int, frame_length_ms: float, frame_step_ms: float,
        fft_length: int | None, dynamic_range_db: float | None = 60.0, **kwargs: Any,
    ) -> None:  # fmt: skip
        # Float32 only: features are computed in float32 under any
        # mixed-precision policy (the model casts them afterwards).
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        check_positive("sample_rate", sample_rate, int)
        check_positive("frame_length_ms", frame_length_ms)
        check_positive("frame_step_ms", frame_step_ms)
        self.frame_length = _dsp.samples(frame_length_ms, sample_rate)
        self.frame_step = _dsp.samples(frame_step_ms, sample_rate)
        if self.frame_length < 2 or self.frame_step < 1:
            raise ValueError(
                f"frame_length_ms={frame_length_ms} and frame_step_ms="
                f"{frame_step_ms} give {self.frame_length} and {self.frame_step} "
                f"samples at {sample_rate} Hz: too short"
            )
        if fft_length is None:
            fft_length = _dsp.next_power_of_two(self.frame_length)
        if not isinstance(fft_length, int) or fft_length < self.frame_length:
            raise ValueError(
                f"fft_length must be an int >= the window ({self.frame_length} "
                f"samples), got {fft_length!r}"
            )
        if dynamic_range_db is not None:
            check_positive("dynamic_range_db", dynamic_range_db)
        self.dynamic_range_db = dynamic_range_db
        self.sample_rate = sample_rate
        self.frame_length_ms = frame_length_ms
        self.frame_step_ms = frame_step_ms
        self.fft_length = fft_length

    def _check_band(self, f_min, f_max):
        """f_max (default: Nyquist) after checking 0 <= f_min < f_max <= Nyquist."""
        nyquist = self.sample_rate / 2
        f_max = nyquist if f_max is None else f_max
        if not 0 <= f_min < f_max <= nyquist:
            raise ValueError(
                f"need 0 <= f_min < f_max <= sample_rate / 2 = {nyquist}, got "
                f"f_min={f_min}, f_max={f_max}"
            )
        return f_max

    def _power_spectrum(self, audio, lengths):
        """(power [B, T, fft_length / 2 + 1], frames [B]).

        audio must be a float [B, N] (ValueError otherwise), finite within
        its lengths (InvalidArgumentError otherwise).
        """
        audio = tf.cast(float_values(audio, "audio", _PCM_HINT), tf.float32)
        if audio.shape.rank != 2:
            raise ValueError(f"audio must be [B, N], got shape {audio.shape}")
        lengths = resolve_lengths(audio, lengths)
        audio = finite_within(audio, lengths, "audio")
        audio = self._within_range(audio, lengths)
        power = _dsp.power_spectrum(
            audio, self.frame_length, self.frame_step, self.fft_length
        )
        frames = _dsp.frame_count(lengths, self.frame_length, self.frame_step)
        return power, frames

    def _within_range(self, audio, lengths):
        """audio, after checking that its power spectrum cannot overflow float32.

        A frame's power in a band is at most (fft_length * max |x|)^2 and the
        frame's energy sums fft_length / 2 + 1 bands: beyond the limit here
        the features would be inf or NaN. Samples are expected in [-1, 1]; an
        InvalidArgumentError names `audio`, the value and its index.
        """
        if in_xla_context():
            return audio
        largest = float(np.finfo(np.float32).max)
        limit = math.sqrt(largest / (self.fft_length + 2)) / self.fft_length
        valid = tf.sequence_mask(lengths, tf.shape(audio)[1])
        check = refuse(
            valid & (tf.abs(audio) > limit),
            audio,
            f"audio samples must lie within +-{limit:.3g} (float32 power spectra of "
            "larger ones overflow; the layers read samples in [-1, 1])",
        )
        with after(check):
            return tf.identity(audio)

    @property
    def feature_size(self) -> int:
        """Values per frame (the subclass's n_mels, n_coefficients)."""
        raise NotImplementedError

    def compute_output_shape(
        self, input_shape: Shape, lengths_shape: Shape | None = None
    ) -> tuple[OutputShape, OutputShape]:
        """((B, T, feature_size), (B,)) of audio (B, N); T is None when N is.

        `input_shape`: Keras's name for the audio's shape when it builds.
        """
        batch, n = input_shape[0], input_shape[1]
        if n is None:
            frames = None
        elif n < self.frame_length:
            frames = 0
        else:
            frames = 1 + (n - self.frame_length) // self.frame_step
        return (batch, frames, self.feature_size), (batch,)

    def _energy_floor(self, power):
        """[B, T, 1]: the floor of each frame's bands, from its energy.

        The frame's spectral energy (sum_k power[k]) scaled by
        10^(-dynamic_range_db / 10); 0 when dynamic_range_db is None.

        float32 FFTs (TF's, TFLite's) round every bin with an error of about
        1e-7 of the frame's amplitude, so bands far below the frame's energy
        hold implementation-dependent noise; the layers floor them here.
        """
        if self.dynamic_range_db is None:
            return tf.zeros_like(power[..., :1])
        scale = 10.0 ** (-self.dynamic_range_db / 10.0)
        return scale * tf.reduce_sum(power, axis=-1, keepdims=True)

    def get_config(self) -> dict[str, Any]:
        return with_attributes(
            super().get_config(), self, "dynamic_range_db", "sample_rate",
            "frame_length_ms", "frame_step_ms", "fft_length",
        )  # fmt: skip
