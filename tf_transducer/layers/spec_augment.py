# SPDX-License-Identifier: Apache-2.0
"""SpecAugment (arXiv 1904.08779) with everything lingvo's SpectrumAugmenter does.

The Keras layer `SpecAugment` chains the building blocks of
`spec_augment_blocks` (functions usable on their own, importable from here
too) per utterance, in lingvo's order:
frequency warp, time warp, frequency noise, time masks, frequency masks.

Shapes: features x [B, T, F, C] (the layer also takes [B, T, F]); lengths
[B] frames. Every block leaves the frames at and after an utterance's length
(its padding) exactly as they were, and a zero-length utterance unchanged.

Randomness comes from a `Draws` object (`tf_transducer.layers.random_draws`):
Keras `SeedGenerator` streams (reproducible with a seed, fresh on every
call) or, for input-dependent stateless seeds, a counter-based hash seeded
from the batch itself (the same input gives the same augmentation). Each
draw has its own stream number so that, as in lingvo, sizes and positions
are not correlated.
"""

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import after
from tf_transducer._checks import finite_within
from tf_transducer._checks import float_values
from tf_transducer._checks import require
from tf_transducer._checks import resolve_lengths
from tf_transducer._checks import with_attributes
from tf_transducer.layers._checks import ListLengths
from tf_transducer.layers._checks import Shape
from tf_transducer.layers.random_draws import Draws
from tf_transducer.layers.random_draws import input_seed
from tf_transducer.layers.spec_augment_blocks import FREQ_MASK_STREAM  # noqa: F401 (the blocks, as before)
from tf_transducer.layers.spec_augment_blocks import FREQ_NOISE_STREAM  # noqa: F401 (the blocks, as before)
from tf_transducer.layers.spec_augment_blocks import FREQ_WARP_STREAM  # noqa: F401 (the blocks, as before)
from tf_transducer.layers.spec_augment_blocks import TIME_MASK_STREAM  # noqa: F401 (the blocks, as before)
from tf_transducer.layers.spec_augment_blocks import TIME_WARP_STREAM  # noqa: F401 (the blocks, as before)
from tf_transducer.layers.spec_augment_blocks import block_mask  # noqa: F401 (the blocks, as before)
from tf_transducer.layers.spec_augment_blocks import frequency_mask  # noqa: F401 (the blocks, as before)
from tf_transducer.layers.spec_augment_blocks import frequency_noise  # noqa: F401 (the blocks, as before)
from tf_transducer.layers.spec_augment_blocks import frequency_warp  # noqa: F401 (the blocks, as before)
from tf_transducer.layers.spec_augment_blocks import resample_axis  # noqa: F401 (the blocks, as before)
from tf_transducer.layers.spec_augment_blocks import time_mask  # noqa: F401 (the blocks, as before)
from tf_transducer.layers.spec_augment_blocks import time_warp  # noqa: F401 (the blocks, as before)
from tf_transducer.layers.spec_augment_blocks import warp_positions  # noqa: F401 (the blocks, as before)

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
        self, freq_mask_max_bins: int | Sequence[int] = 15,
        freq_mask_count: int | Sequence[int] = 1,
        use_dynamic_time_mask_max_frames: bool | Sequence[bool] = False,
        time_mask_max_frames: int | Sequence[int] = 50,
        time_mask_count: int | Sequence[int] = 1,
        time_mask_max_ratio: float | Sequence[float] = 1.0,
        time_masks_per_frame: float | Sequence[float] = 0.0,
        freq_warp_max_bins: int | Sequence[int] = 0,
        time_warp_bound: str | Sequence[str] = "static",
        time_warp_max_frames: int | Sequence[int] = 0,
        time_warp_max_ratio: float | Sequence[float] = 0.0, use_noise: bool = False,
        gaussian_noise: bool = False,
        freq_noise_max_stddev: float | Sequence[float] = 0.0,
        freq_noise_warmup_steps: int = 0, start_step: int = 0, unstack: bool = False,
        stack_height: int = 3, domain_ids: Sequence[int] = (0,),
        use_input_dependent_random_seed: bool = False, seed: int | None = None,
        **kwargs: Any,
    ) -> None:  # fmt: skip
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
        self._domain_params: list[dict[str, Any]] = [{} for _ in domain_ids]
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
    def from_preset(cls, name: str, **overrides: Any) -> "SpecAugment":
        """A layer with one of the paper's policies: "LB", "LD", "SM", "SS"."""
        if name not in PRESETS:
            raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {name!r}")
        return cls(**{**PRESETS[name], **overrides})

    @classmethod
    def from_arg(cls, augment: str | dict[str, Any] | None) -> "SpecAugment | None":
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

    def build(self, features_shape: Shape, *args: Any, **kwargs: Any) -> None:
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
        self, features: TensorLike, lengths: TensorLike | None = None,
        domain_ids: TensorLike | None = None, training: bool | None = None,
        step: TensorLike | None = None, mask: TensorLike | None = None,
    ) -> tf.Tensor:  # fmt: skip
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

    def compute_mask(
        self, inputs: TensorLike, mask: TensorLike | None = None
    ) -> TensorLike | None:
        return mask

    def compute_output_shape(
        self, features_shape: Shape, *args: Any, **kwargs: Any
    ) -> Shape:
        return features_shape

    def get_config(self) -> dict[str, Any]:
        config = with_attributes(
            super().get_config(), self, *PER_DOMAIN, "use_noise", "gaussian_noise",
            "freq_noise_warmup_steps", "start_step", "unstack", "stack_height",
            "use_input_dependent_random_seed", "seed",
        )  # fmt: skip
        return dict(config, domain_ids=list(self.domain_ids))
