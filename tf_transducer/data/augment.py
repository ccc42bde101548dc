# SPDX-License-Identifier: Apache-2.0
"""Waveform augmentation: what speech toolkits do when real data is scarce.

The transforms (`tf_transducer.data.wave_transforms`, importable from here
too) each take one utterance, `audio` [N] float32, and are TensorFlow ops
with stateless randomness: a `seed` is a [2] int tensor, and the same seed
gives the same output on every run. `WaveAugment` chains them with a
probability for each, the way Kaldi / Lhotse / NeMo recipes do.

Lengths: `speed_perturb` and `time_stretch` change the length (N / factor);
everything else keeps it, and keeps the speech where it was (reverberation
puts the direct path first), so transcripts stay aligned. A padded batch
goes through `augment_batch`, which augments each utterance up to its
length and pads again.

    from tf_transducer.data.augment import WaveAugment

    augment = WaveAugment(sample_rate=8000, speeds=(0.9, 1.0, 1.1))
    noisy = augment(audio, seed=tf.constant([7, 0]))
"""

import dataclasses
import functools
from collections.abc import Callable
from collections.abc import Mapping
from typing import TYPE_CHECKING
from typing import Any

import numpy as np
import tensorflow as tf
from numpy.typing import ArrayLike

from tf_transducer._checks import TensorLike
from tf_transducer.data.wave_transforms import PITCH_STEPS  # noqa: F401 (importable from here)
from tf_transducer.data.wave_transforms import add_noise  # noqa: F401 (importable from here)
from tf_transducer.data.wave_transforms import audio_tensor  # noqa: F401 (importable from here)
from tf_transducer.data.wave_transforms import babble_noise  # noqa: F401 (importable from here)
from tf_transducer.data.wave_transforms import coloured_noise  # noqa: F401 (importable from here)
from tf_transducer.data.wave_transforms import dc_offset  # noqa: F401 (importable from here)
from tf_transducer.data.wave_transforms import gain  # noqa: F401 (importable from here)
from tf_transducer.data.wave_transforms import make_babble_bank  # noqa: F401 (importable from here)
from tf_transducer.data.wave_transforms import pitch_shift  # noqa: F401 (importable from here)
from tf_transducer.data.wave_transforms import reverberate  # noqa: F401 (importable from here)
from tf_transducer.data.wave_transforms import speed_perturb  # noqa: F401 (importable from here)
from tf_transducer.data.wave_transforms import synthetic_rir  # noqa: F401 (importable from here)
from tf_transducer.data.wave_transforms import telephone  # noqa: F401 (importable from here)
from tf_transducer.data.wave_transforms import time_stretch  # noqa: F401 (importable from here)


@dataclasses.dataclass(frozen=True)
class WaveAugment:
    """A random chain of waveform augmentations, each with its probability.

    They are applied in this order: speed, pitch, tempo, reverberation,
    telephone channel, noise, gain, DC offset. Each step happens with its
    probability (`*_prob`); its strength is drawn uniformly from its range.

    Attributes:
      sample_rate: Hz of the audio.
      speeds: speed factors picked with equal chance (Kaldi: 0.9, 1.0, 1.1).
      pitch_prob, pitch_semitones: `pitch_shift` by one of PITCH_STEPS
        shifts each way, evenly spaced up to +-pitch_semitones.
      tempo_prob, tempo_range: `time_stretch` rate (min, max).
      reverb_prob, rt60_range: `synthetic_rir` RT60 seconds (min, max).
      telephone_prob: `telephone` channel.
      noise_prob, snr_range: `add_noise` at SNR dB (min, max), the noise
        white, pink or brown, or babble when a bank was given (then half of
        the time).
      gain_db: `gain` of +-gain_db dB (always; 0 turns it off).
      dc_prob, dc_max: `dc_offset` of +-dc_max at most.
      babble: optional [K, S] float32 bank from `make_babble_bank`.
    """

    sample_rate: int
    speeds: tuple = (0.9, 1.0, 1.1)
    pitch_prob: float = 0.3
    pitch_semitones: float = 2.0
    tempo_prob: float = 0.2
    tempo_range: tuple = (0.9, 1.1)
    reverb_prob: float = 0.3
    rt60_range: tuple = (0.1, 0.6)
    telephone_prob: float = 0.2
    noise_prob: float = 0.5
    snr_range: tuple = (5.0, 30.0)
    gain_db: float = 10.0
    dc_prob: float = 0.2
    dc_max: float = 0.02
    babble: object = dataclasses.field(default=None, compare=False, repr=False)
    if TYPE_CHECKING:
        # Set by __post_init__. Declared for type checkers only: at run time
        # it is no field (get_config and comparisons do not see it).
        _traced: Callable[[tf.Tensor, tf.Tensor], tf.Tensor] = dataclasses.field(
            init=False
        )

    def __post_init__(self):
        if not isinstance(self.sample_rate, int) or self.sample_rate <= 0:
            raise ValueError(
                f"sample_rate must be a positive int, got {self.sample_rate!r}"
            )
        speeds = tuple(self.speeds)
        if not speeds or any(not isinstance(s, (int, float)) or s <= 0 for s in speeds):
            raise ValueError(f"speeds must be positive factors, got {self.speeds!r}")
        object.__setattr__(self, "speeds", speeds)
        for name in ("pitch", "tempo", "reverb", "telephone", "noise", "dc"):
            p = getattr(self, f"{name}_prob")
            if not isinstance(p, (int, float)) or not 0 <= p <= 1:
                raise ValueError(f"{name}_prob must be in [0, 1], got {p!r}")
        for name, low_bound in (
            ("tempo_range", 0),
            ("rt60_range", 0),
            ("snr_range", None),
        ):
            value = getattr(self, name)
            if (
                len(value) != 2
                or not value[0] <= value[1]
                or (low_bound is not None and value[0] <= low_bound)
            ):
                raise ValueError(
                    f"{name} must be (min, max) with 0 < min <= max, got {value!r}"
                )
            object.__setattr__(self, name, tuple(float(v) for v in value))
        for name in ("pitch_semitones", "gain_db", "dc_max"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")
        if self.babble is not None:
            bank = np.asarray(self.babble, np.float32)
            if bank.ndim != 2 or bank.shape[0] < 1 or bank.shape[1] < 1:
                raise ValueError(
                    f"babble must be a [K, S] bank, got shape {bank.shape}"
                )
            object.__setattr__(self, "babble", bank)
        # Traced once: each epoch's new tf.data pipeline reuses the graph
        # instead of tracing the whole chain again (seconds per epoch).
        traced = tf.function(
            self._augment,
            input_signature=[
                tf.TensorSpec([None], tf.float32),
                tf.TensorSpec([2], tf.int64),
            ],
        )
        object.__setattr__(self, "_traced", traced)

    def get_config(self) -> dict[str, Any]:
        """The parameters (not the babble bank) as a JSON-able dict."""
        config = dataclasses.asdict(self)
        config.pop("babble")
        return {k: list(v) if isinstance(v, tuple) else v for k, v in config.items()}

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], babble: ArrayLike | None = None
    ) -> "WaveAugment":
        return cls(**config, babble=babble)

    def __call__(self, audio: TensorLike, seed: TensorLike) -> tf.Tensor:
        """One augmented copy of audio [N] float32; seed: [2] int tensor.

        The length changes with speed and tempo (N / factor).
        """
        audio = audio_tensor(audio)
        seed = tf.cast(tf.convert_to_tensor(seed), tf.int64)
        if seed.shape.rank is not None and seed.shape.as_list() != [2]:
            raise ValueError(f"seed must have shape [2], got {seed.shape}")
        return self._traced(tf.reshape(audio, [-1]), tf.reshape(seed, [2]))

    def _augment(self, audio, seed):
        seeds = tf.random.experimental.stateless_split(seed, 16)
        draws = tf.random.stateless_uniform([16], seeds[15])
        rate = self.sample_rate

        def chance(i, p):
            return draws[i] < p

        def between(i, low, high):
            u = tf.random.stateless_uniform([], seeds[i])
            return low + (high - low) * u

        if len(self.speeds) > 1 or self.speeds[0] != 1.0:
            pick = tf.random.stateless_uniform(
                [], seeds[0], 0, len(self.speeds), tf.int32
            )
            audio = tf.switch_case(
                pick,
                [
                    functools.partial(speed_perturb, audio, s) if s != 1.0 else
                    functools.partial(tf.identity, audio)
                    for s in self.speeds
                ],
            )  # fmt: skip
        if self.pitch_prob > 0 and self.pitch_semitones > 0:
            # PITCH_STEPS shifts each way, evenly spaced up to pitch_semitones.
            shifts = np.linspace(-1, 1, 2 * PITCH_STEPS + 1) * self.pitch_semitones
            shifts = [float(s) for s in shifts if s != 0]
            pick = tf.random.stateless_uniform([], seeds[1], 0, len(shifts), tf.int32)
            branches = [functools.partial(pitch_shift, audio, s, rate) for s in shifts]
            audio = tf.cond(
                chance(1, self.pitch_prob),
                lambda: tf.switch_case(pick, branches),
                lambda: audio,
            )
        if self.tempo_prob > 0:
            stretch = between(2, *self.tempo_range)
            audio = tf.cond(
                chance(2, self.tempo_prob),
                lambda: time_stretch(audio, stretch, rate),
                lambda: audio,
            )
        if self.reverb_prob > 0:
            rt60 = between(3, *self.rt60_range)
            audio = tf.cond(
                chance(3, self.reverb_prob),
                lambda: reverberate(audio, synthetic_rir(rt60, rate, seeds[4])),
                lambda: audio,
            )
        if self.telephone_prob > 0:
            audio = tf.cond(
                chance(4, self.telephone_prob),
                lambda: telephone(audio, rate),
                lambda: audio,
            )
        if self.noise_prob > 0:
            audio = tf.cond(
                chance(5, self.noise_prob),
                lambda: add_noise(
                    audio,
                    self._noise(tf.shape(audio)[0], seeds[5:9]),
                    between(9, *self.snr_range),
                ),
                lambda: audio,
            )
        if self.gain_db > 0:
            audio = gain(audio, between(10, -self.gain_db, self.gain_db))
        if self.dc_prob > 0 and self.dc_max > 0:
            offset = between(11, -self.dc_max, self.dc_max)
            audio = tf.cond(
                chance(6, self.dc_prob), lambda: dc_offset(audio, offset), lambda: audio
            )
        return audio

    def _noise(self, length, seeds):
        """White, pink or brown noise, or babble (half the time, when given)."""
        colour = tf.random.stateless_uniform([], seeds[0], 0, 3, tf.int32)
        noise = tf.switch_case(
            colour,
            [
                lambda: coloured_noise(length, 0, seeds[1]),
                lambda: coloured_noise(length, 1.0, seeds[1]),
                lambda: coloured_noise(length, 2.0, seeds[1]),
            ],
        )
        if self.babble is None:
            return noise
        use_babble = tf.random.stateless_uniform([], seeds[2]) < 0.5
        return tf.cond(
            use_babble,
            lambda: babble_noise(self.babble, length, seeds[3]),
            lambda: noise,
        )


def augment_batch(
    augment: Callable[[tf.Tensor, tf.Tensor], tf.Tensor],
    audio: TensorLike,
    lengths: TensorLike,
    seed: TensorLike,
) -> tuple[tf.Tensor, tf.Tensor]:
    """A padded batch through `augment` (e.g. a `WaveAugment`), row by row.

    Each utterance is augmented alone: padding is never augmented and stays
    zero.

    Args:
      augment: callable (audio [n], seed [2]) -> audio [m].
      audio: [B, N] float32, padded with zeros.
      lengths: [B] int, samples of each row.
      seed: [2] int; row b uses a seed split from it.

    Returns:
      (audio [B, M] float32 padded with zeros, lengths [B] int32).
    """
    audio = tf.convert_to_tensor(audio, tf.float32)
    if audio.shape.rank is not None and audio.shape.rank != 2:
        raise ValueError(f"audio must be [batch, samples], got shape {audio.shape}")
    lengths = tf.cast(lengths, tf.int32)
    tf.debugging.assert_less_equal(
        lengths, tf.shape(audio)[1], message="lengths must be <= audio's samples"
    )
    seeds = tf.random.experimental.stateless_split(
        tf.cast(tf.convert_to_tensor(seed), tf.int64), tf.shape(audio)[0]
    )

    def one(args):
        row, n, row_seed = args
        out = augment(row[:n], row_seed)
        return tf.RaggedTensor.from_tensor(out[None, :]), tf.shape(out)[0]

    rows, new_lengths = tf.map_fn(
        one,
        (audio, lengths, seeds),
        fn_output_signature=(
            tf.RaggedTensorSpec([1, None], tf.float32, ragged_rank=1),
            tf.int32,
        ),
    )
    return rows.merge_dims(1, 2).to_tensor(), new_lengths
