# SPDX-License-Identifier: Apache-2.0
"""FeatureNormalization: per-utterance or global mean / variance normalisation."""

from collections.abc import Callable
from collections.abc import Iterable
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from tf_transducer._checks import TensorLike
from tf_transducer._checks import check_positive
from tf_transducer._checks import finite_within
from tf_transducer._checks import float_values
from tf_transducer._checks import resolve_lengths
from tf_transducer._checks import with_attributes
from tf_transducer.layers import _dsp
from tf_transducer.layers._checks import ListLengths
from tf_transducer.layers._checks import OutputShape
from tf_transducer.layers._checks import Shape
from tf_transducer.layers._checks import TracedOutputSpec

_MODES = ("utterance", "global")


@keras.saving.register_keras_serializable(package="tf_transducer")
class FeatureNormalization(TracedOutputSpec, ListLengths, keras.layers.Layer):
    """(x - mean) / sqrt(variance + epsilon) per feature, over valid frames only.

    mode="utterance": mean and variance of each utterance's own frames (an
    utterance without frames stays 0). mode="global": fixed statistics,
    computed from training data with `adapt` and saved with the model.

    float32 only, under any dtype policy, like the feature layers before it
    (a mixed-precision model casts the normalised features after).

    Args:
      mode: "utterance" or "global".
      epsilon: added to the variance.

    Call arguments:
      features: float [B, T, F], padded; finite within each length (NaN or
        inf there, which would spread over the utterance, is an
        InvalidArgumentError; the padding may hold anything). Integer
        features are a ValueError.
      lengths: optional int [B] frames (default: T).

    Returns:
      (normalised [B, T, F], lengths [B]), 0 past each length.
    """

    def __init__(
        self, mode: str = "utterance", epsilon: float = 1e-5, **kwargs: Any
    ) -> None:
        # Float32 only: features are computed in float32 under any
        # mixed-precision policy (the model casts them afterwards).
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
        check_positive("epsilon", epsilon)
        self.mode = mode
        self.epsilon = epsilon

    def build(self, features_shape: Shape, lengths_shape: Shape | None = None) -> None:
        if self.mode == "global":
            dim = features_shape[-1]
            self.mean = self.add_weight(
                shape=(dim,), initializer="zeros", trainable=False, name="mean"
            )
            self.variance = self.add_weight(
                shape=(dim,), initializer="ones", trainable=False, name="variance"
            )

    def adapt(
        self,
        data: Iterable[Any],
        combine: Callable[[np.ndarray], Any] | None = None,
    ) -> None:
        """Sets the global statistics from (features [B, T, F], lengths [B]) batches.

        Args:
          data: an iterable (e.g. a tf.data.Dataset) of (features, lengths)
            pairs, or of dicts with "features" and "feature_length" (the
            batches of `tf_transducer.data.SpeechDataset`); only frames within
            each length count. Accumulated in float64.
          combine: optional function of a float64 vector of this process's
            sums -> the same sums over every worker (e.g.
            `functools.partial(tf_transducer.training.all_reduce_sums,
            strategy)`), so that workers reading disjoint shards of the data
            set the same statistics.

        Raises:
          ValueError: a batch whose features are not float [B, T, F] (with
            the F of the others), whose lengths are not B ints in [0, T], or
            whose features hold NaN or inf within their lengths (the message
            names the batch and the value's index); or no frames at all.
        """
        if self.mode != "global":
            raise ValueError('adapt() needs mode="global"')
        total: Any  # 0.0, then float64 sums [F] from the first batch
        squares: Any
        count, total, squares = 0, 0.0, 0.0
        dim = self.mean.shape[0] if self.built else None
        for number, batch in enumerate(data):
            if isinstance(batch, dict) and {"features", "feature_length"} <= set(batch):
                features, lengths = batch["features"], batch["feature_length"]
            elif isinstance(batch, (tuple, list)) and len(batch) == 2:
                features, lengths = batch
            else:
                raise ValueError(
                    f"adapt(): batch {number} of data must be a (features, "
                    'lengths) pair or a dict with "features" and "feature_length", '
                    f"got {_describe(batch)}"
                )
            frames = _adapt_frames(features, lengths, number, dim)  # [frames, F]
            dim = frames.shape[1]
            count += frames.shape[0]
            total = total + frames.sum(axis=0)
            squares = squares + (frames**2).sum(axis=0)
        if combine is not None:
            if dim is None:
                raise ValueError(
                    "adapt(): no batches in data and the layer is not built, so "
                    "its sums cannot be combined with other workers': build it "
                    "first (layer.build((None, None, F)))"
                )
            total, squares = (np.broadcast_to(v, [dim]) for v in (total, squares))
            sums = np.concatenate([[count], total, squares])
            sums = np.asarray(combine(sums), np.float64)
            count, total, squares = sums[0], sums[1 : dim + 1], sums[dim + 1 :]
        if count == 0:
            raise ValueError("adapt() found no frames in data")
        mean = total / count
        variance = np.maximum(squares / count - mean**2, 0.0)
        if not self.built:
            self.build((None, None, mean.shape[0]))
        self.mean.assign(mean.astype(np.float32))
        self.variance.assign(variance.astype(np.float32))

    def call(
        self, features: TensorLike, lengths: TensorLike | None = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        features = tf.cast(float_values(features, "features"), tf.float32)
        if features.shape.rank != 3:
            raise ValueError(f"features must be [B, T, F], got shape {features.shape}")
        lengths = resolve_lengths(features, lengths)
        features = finite_within(features, lengths, "features")
        if self.mode == "global" and features.shape[-1] not in (
            None,
            self.mean.shape[0],
        ):
            raise ValueError(
                f"features have {features.shape[-1]} values per frame, the "
                f"global statistics {self.mean.shape[0]}"
            )
        x = _dsp.zero_after(features, lengths)
        if self.mode == "global":
            mean, variance = self.mean, self.variance
        else:
            mask = tf.sequence_mask(lengths, tf.shape(x)[1], dtype=x.dtype)
            mask = tf.expand_dims(mask, -1)
            count = tf.maximum(tf.reduce_sum(mask, axis=1, keepdims=True), 1.0)
            mean = tf.reduce_sum(x, axis=1, keepdims=True) / count
            variance = tf.reduce_sum(mask * tf.square(x - mean), axis=1, keepdims=True)
            variance = variance / count
        normalised = (x - mean) * tf.math.rsqrt(variance + self.epsilon)
        return _dsp.zero_after(normalised, lengths), lengths

    def compute_output_shape(
        self, features_shape: Shape, lengths_shape: Shape | None = None
    ) -> tuple[OutputShape, OutputShape]:
        return tuple(features_shape), (features_shape[0],)

    def get_config(self) -> dict[str, Any]:
        return with_attributes(super().get_config(), self, "mode", "epsilon")


def _adapt_frames(features, lengths, number, dim):
    """float64 [frames, F]: the valid frames of batch `number` of adapt's data.

    Raises ValueError naming the batch unless features are float [B, T, F]
    (F = dim when not None), finite within lengths, and lengths are B ints
    in [0, T].
    """
    where = f"adapt(): batch {number} of data"
    features = np.asarray(features)
    if not np.issubdtype(features.dtype, np.floating):
        raise ValueError(f"{where}: features must be float, got dtype {features.dtype}")
    if features.ndim != 3 or dim not in (None, features.shape[2]):
        want = "[B, T, F]" if dim is None else f"[B, T, {dim}]"
        raise ValueError(
            f"{where}: features must be {want}, got shape {features.shape}"
        )
    lengths = np.asarray(lengths)
    size = features.shape[1]
    if not np.issubdtype(lengths.dtype, np.integer) or lengths.shape != (
        features.shape[0],
    ):
        raise ValueError(
            f"{where}: lengths must be {features.shape[0]} ints (one per "
            f"utterance), got dtype {lengths.dtype} and shape {lengths.shape}"
        )
    if ((lengths < 0) | (lengths > size)).any():
        raise ValueError(
            f"{where}: lengths must lie in [0, {size}], got {lengths.tolist()}"
        )
    valid = np.arange(size)[None, :] < lengths[:, None]
    bad = np.argwhere(~np.isfinite(features) & valid[..., None])
    if len(bad):
        raise ValueError(
            f"{where}: features must be finite within their lengths; got "
            f"{features[tuple(bad[0])]} at [b, t, f] = {bad[0].tolist()}"
        )
    return features[valid].astype(np.float64)


def _describe(batch):
    """A short description of an adapt() batch of the wrong structure."""
    if isinstance(batch, dict):
        return f"a dict with keys {sorted(map(str, batch))}"
    if isinstance(batch, (tuple, list)):
        return f"a {type(batch).__name__} of {len(batch)} items"
    return f"{type(batch).__name__}"
