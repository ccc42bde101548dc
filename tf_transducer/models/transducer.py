# SPDX-License-Identifier: Apache-2.0
"""Transducer: an RNN-T model composed of an encoder, a prediction network, a joiner."""

import warnings
from collections.abc import Mapping
from typing import Any

import keras
import tensorflow as tf

from tf_transducer._checks import check_positive
from tf_transducer._checks import float_values
from tf_transducer._checks import resolve_lengths
from tf_transducer.layers import FeatureNormalization
from tf_transducer.layers import LogMelSpectrogram
from tf_transducer.layers import SpecAugment
from tf_transducer.layers.streaming import check_chunk_frames
from tf_transducer.layers.streaming import check_streaming_encoder
from tf_transducer.losses import CtcLoss
from tf_transducer.losses import FusedRnntLoss
from tf_transducer.losses import FusedTdtLoss
from tf_transducer.losses import PrunedRnntLoss
from tf_transducer.losses import RnntLoss
from tf_transducer.losses import TdtLoss
from tf_transducer.models._inputs import optimizer_step
from tf_transducer.models._inputs import plus_added_losses
from tf_transducer.models._inputs import split_inputs
from tf_transducer.models.legacy import is_legacy
from tf_transducer.models.legacy import legacy_parts
from tf_transducer.models.legacy import split_legacy
from tf_transducer.models.presets import PARTS
from tf_transducer.models.presets import build_part
from tf_transducer.models.presets import merged
from tf_transducer.models.presets import preset_parts


@keras.saving.register_keras_serializable(package="tf_transducer")
class Transducer(keras.Model):
    """An RNN transducer composed of its parts: encoder, prediction network, joiner.

    features (or audio, with `features` set) -> [normalization] ->
    [SpecAugment, in training] -> encoder -> per frame; [blank] + labels ->
    predictor -> per label; the joiner on every (frame, label) pair
    (RnntLoss; FusedRnntLoss computes the same loss without ever storing the
    logits) or on the pruned ones (PrunedRnntLoss, which also trains the
    linear "simple" projections `simple_am` / `simple_lm`). A joiner with a
    duration head (`TransducerJoiner(..., durations=[0, 1, 2, 3, 4])`) makes
    a Token-and-Duration Transducer, trained with TdtLoss, whose decoding
    skips frames.

    With `ctc_weight` > 0 the model is a hybrid (icefall's CTC auxiliary
    loss, NeMo's hybrid RNNT-CTC and TDT-CTC models): a CTC head, a linear
    projection of the encoder output to the vocab_size classes (the blank
    0 shared), trains beside the transducer, the loss becoming transducer
    loss + ctc_weight * CTC loss (`CtcLoss` with the compiled loss'
    reduction and pad_id, and zero_infinity); it gives a second, cheaper
    decoder (`ctc_logits`, `transducer_ctc_decode`).

    `model(inputs)` returns {"encoder": [B, T', H], "lengths": [B]} (and
    "ctc_logits" [B, T', V] with a CTC head); the loss
    is computed in `compute_loss` from those and the labels y [B, S] (padded
    with -1), so `compile(loss=RnntLoss())` (or `FusedRnntLoss()`,
    `PrunedRnntLoss()`) and `fit(dataset of ((features, lengths), labels))`
    just work.

    Args:
      vocab_size: classes including the blank (0).
      encoder: a streaming encoder layer (`TransducerEncoder`,
        `ConformerEncoder`, or any layer keeping the contract of
        `tf_transducer.layers.streaming`), or its part configuration
        {"class_name": "ConformerEncoder", "d_model": 144, ...}.
      predictor: a `PredictionNetwork` (or its part configuration) over
        vocab_size classes.
      joiner: a `TransducerJoiner` (or its part configuration) over
        vocab_size classes.
      features: None (features in), or a `LogMelSpectrogram` layer (or a dict
        of its arguments): raw audio in, the features computed inside, as
        in the export.
      normalization: None, "global" (a `FeatureNormalization("global")`,
        to `adapt`), or a `FeatureNormalization` layer.
      augment: None, a `SpecAugment` layer, a SpecAugment preset name or a
        dict of its arguments (applied in training only).
      feature_dim: features per frame (taken from `features` when given).
      ctc_weight: 0 (no CTC head), or the weight > 0 of the CTC head's loss
        (icefall's ctc-loss-scale 0.2, NeMo's ctc_loss_weight 0.3).

    Presets as keras-hub's: `Transducer.from_preset("conformer-2m",
    vocab_size=256)` (`tf_transducer.models.PRESETS`). The 0.1 flat keyword
    arguments (`encoder="conformer"`, `encoder_units=...`) still build the
    same model, with a DeprecationWarning, and `.keras` files of that layout
    load.

    Example:
    ```python
    from tf_transducer.layers import (
        PredictionNetwork, TransducerEncoder, TransducerJoiner)
    model = Transducer(
        29, TransducerEncoder(256, 2, stack=3), PredictionNetwork(29, 64, 128),
        TransducerJoiner(29, 128), feature_dim=80, normalization="global")
    model.compile(optimizer="adam", loss=tf_transducer.FusedRnntLoss())
    ```
    """

    def __init__(
        self, vocab_size: int, encoder: Any = None, predictor: Any = None,
        joiner: Any = None, features: Any = None, normalization: Any = None,
        augment: Any = None, feature_dim: int = 80, ctc_weight: float = 0.0,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        flat = split_legacy(kwargs)
        for kind, value in (("encoder", encoder), ("predictor", predictor)):
            if isinstance(value, str):  # 0.1's encoder="lstm", predictor="lstm"
                flat[kind] = value
        encoder = None if isinstance(encoder, str) else encoder
        predictor = None if isinstance(predictor, str) else predictor
        if flat:
            warnings.warn(
                "Transducer's flat keyword arguments (encoder=<kind>, "
                f"{', '.join(sorted(k for k in flat if k != 'encoder')) or '...'}) "
                "are the 0.1 layout: pass the parts (encoder=TransducerEncoder(...),"
                " predictor=..., joiner=...) or use Transducer.from_preset",
                DeprecationWarning,
                stacklevel=2,
            )
            parts = legacy_parts(flat)
            encoder = parts["encoder"] if encoder is None else encoder
            predictor = parts["predictor"] if predictor is None else predictor
            joiner = parts["joiner"] if joiner is None else joiner
        super().__init__(**kwargs)
        check_positive("vocab_size", vocab_size, int)
        for part, value in (("encoder", encoder), ("predictor", predictor),
                            ("joiner", joiner)):  # fmt: skip
            if value is None:
                raise ValueError(
                    f"{part} is needed: a layer or its part configuration (or "
                    "Transducer.from_preset(name, vocab_size))"
                )
        self.vocab_size = vocab_size
        # (The layers in 0.1's order: their seed generators draw the same seeds.)
        self.feature_layer = _feature_layer(features)
        if self.feature_layer is None:
            check_positive("feature_dim", feature_dim, int)
        self.feature_dim = (
            self.feature_layer.n_mels if self.feature_layer else feature_dim
        )
        self.normalizer = _normalizer(normalization)
        self.augment = augment
        self.spec_augment = (
            augment
            if isinstance(augment, SpecAugment)
            else SpecAugment.from_arg(augment)
        )
        self.encoder = build_part("encoder", encoder, vocab_size)
        check_streaming_encoder(self.encoder)
        self.predictor = build_part("predictor", predictor, vocab_size)
        self.joiner = build_part("joiner", joiner, vocab_size)
        for part in ("predictor", "joiner"):
            size = getattr(getattr(self, part), "vocab_size", None)
            if size != vocab_size:
                raise ValueError(
                    f"{part} has vocab_size {size}, the model {vocab_size}: they "
                    "must agree"
                )
        self.simple_am = keras.layers.Dense(vocab_size, name="simple_am")
        self.simple_lm = keras.layers.Dense(vocab_size, name="simple_lm")
        number = isinstance(ctc_weight, int | float) and not isinstance(
            ctc_weight, bool
        )
        if not number or not 0.0 <= ctc_weight < float("inf"):
            raise ValueError(
                f"ctc_weight must be a number >= 0 (0: no CTC head), got {ctc_weight!r}"
            )
        self.ctc_weight = float(ctc_weight)
        self.ctc_head: keras.layers.Dense | None = (
            keras.layers.Dense(vocab_size, name="ctc_head") if ctc_weight > 0 else None
        )

    @classmethod
    def from_preset(
        cls, preset: str, vocab_size: int, *, encoder: Mapping[str, Any] | None = None,
        predictor: Mapping[str, Any] | None = None,
        joiner: Mapping[str, Any] | None = None, **kwargs: Any,
    ) -> "Transducer":  # fmt: skip
        """A Transducer of a preset's parts (`tf_transducer.models.PRESETS`).

        Args:
          preset: "lstm-1m", "conformer-2m" or "conformer-10m".
          vocab_size: classes including the blank.
          encoder: optional arguments overriding the preset encoder's, e.g.
            {"chunk_size": 4} (a "class_name" there replaces the part).
          predictor: the same for the prediction network.
          joiner: the same for the joiner.
          **kwargs: the model's other arguments (feature_dim, features,
            normalization, augment, name).
        """
        parts = preset_parts(preset)
        given = dict(encoder=encoder, predictor=predictor, joiner=joiner)
        for part, value in given.items():
            if value is not None and not isinstance(value, Mapping):
                raise ValueError(
                    f"{part} must be a dict of {parts[part]['class_name']} "
                    f"arguments overriding the preset's, got {value!r}"
                )
        encoder, predictor, joiner = (merged(parts[p], given[p]) for p in PARTS)
        return cls(vocab_size, encoder, predictor, joiner, **kwargs)

    def build(self, input_shape: Any = None) -> None:
        frames = (None, None, self.feature_dim)
        shapes = [
            (self.normalizer, (frames,)),
            (self.spec_augment, (frames,)),
            (self.encoder, (frames,)),
            (self.predictor, ()),
            (self.joiner, ((None, self.encoder.units), (None, self.predictor.units))),
            (self.simple_am, ((None, self.encoder.units),)),
            (self.simple_lm, ((None, self.predictor.units),)),
            (self.ctc_head, ((None, self.encoder.units),)),
        ]
        for layer, shape in shapes:  # (parts given built, or loaded, stay so)
            if layer is not None and not layer.built:
                layer.build(*shape)
        self.built = True

    def build_from_config(self, config: dict[str, Any]) -> None:
        """Builds a loaded model: its shapes are its own (feature_dim, the parts)."""
        self.build()

    def compile(self, *args: Any, **kwargs: Any) -> None:
        """keras.Model.compile; the simple projections train only with PrunedRnntLoss.

        The full losses (RnntLoss, FusedRnntLoss) do not use them.
        """
        super().compile(*args, **kwargs)
        pruned = isinstance(self.loss, PrunedRnntLoss)
        self.simple_am.trainable = self.simple_lm.trainable = pruned

    def compile_from_config(self, config: dict[str, Any]) -> None:
        """Compiles a loaded model as it was saved, loss and optimizer included.

        (Keras skips this for models that override `compile`.)
        """
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:  # its variables, for the saved optimizer state
            self.optimizer.build(self.trainable_variables)

    def _split(self, inputs):
        return split_inputs(inputs, "audio" if self.feature_layer else "features")

    def features(self, inputs: Any) -> tuple[tf.Tensor, tf.Tensor]:
        """(normalised features [B, T, F], frames [B]) of the inputs."""
        values, lengths = self._split(inputs)
        if self.feature_layer is not None:
            values, lengths = self.feature_layer(values, lengths)
        if self.normalizer is not None:
            values, lengths = self.normalizer(values, lengths)
        return values, lengths

    def encode(
        self, inputs: Any, training: bool | None = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """(encoded [B, T', H], lengths [B])."""
        values, lengths = self.features(inputs)
        if self.spec_augment is not None and training:
            values = self.spec_augment(
                values, lengths, training=True, step=optimizer_step(self)
            )
        return self.encoder(values, lengths, training=training)

    def stream_encode(
        self, inputs: Any, chunk_frames: int | None = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """`encode` (inference) as a stream: encoder.step over feature chunks.

        The features (zeros past the lengths) are cut into chunks of
        `chunk_frames` frames (the last one padded with zeros) and encoded
        one after the other with the encoder's states carried, as a
        streaming runtime does. The LSTM encoder streams exactly; the
        Conformer's chunk-masked attention does when chunk_frames =
        chunk_size * subsampling (its default; n * subsampling frames equal
        the offline call with chunk_size=n).

        Args:
          inputs: as `call`'s (features or audio, optional lengths).
          chunk_frames: feature frames per step, a positive multiple of the
            encoder's subsampling (default: the encoder's
            `default_chunk_frames`).

        Returns:
          (encoded [B, ceil(T / subsampling), H], 0 past the lengths;
          lengths [B]), as `encode(inputs, training=False)`. Eager only.
        """
        sub = self.encoder.subsampling
        if chunk_frames is None:
            chunk_frames = self.encoder.default_chunk_frames
        check_chunk_frames(chunk_frames, sub)
        values, lengths = self.features(inputs)
        values = float_values(values, "features")
        lengths = resolve_lengths(values, lengths)
        frames = int(values.shape[1])
        valid = tf.sequence_mask(lengths, frames)[..., None]
        values = tf.where(valid, values, tf.zeros_like(values))  # as a stream's
        chunks = -(-frames // chunk_frames)
        values = tf.pad(values, [[0, 0], [0, chunks * chunk_frames - frames], [0, 0]])
        states = self.encoder.initial_state(int(values.shape[0]))
        outputs = []
        for c in range(chunks):
            chunk = values[:, c * chunk_frames : (c + 1) * chunk_frames]
            count = tf.clip_by_value(lengths - c * chunk_frames, 0, chunk_frames)
            encoded, states = self.encoder.step(chunk, states, count)
            outputs.append(encoded)
        out_lengths = (lengths + sub - 1) // sub
        encoded = tf.concat(outputs, axis=1)[:, : -(-frames // sub)]
        mask = tf.sequence_mask(out_lengths, tf.shape(encoded)[1], encoded.dtype)
        return encoded * mask[..., None], out_lengths

    def call(self, inputs: Any, training: bool | None = None) -> dict[str, tf.Tensor]:
        encoded, lengths = self.encode(inputs, training=training)
        out = {"encoder": encoded, "lengths": lengths}
        if self.ctc_head is not None:
            out["ctc_logits"] = self.ctc_head(encoded)
        return out

    def ctc_logits(self, inputs: Any) -> tuple[tf.Tensor, tf.Tensor]:
        """(CTC head logits [B, T', V], lengths [B]) of the inputs (inference).

        Raises:
          ValueError: the model has no CTC head (ctc_weight 0).
        """
        if self.ctc_head is None:
            raise ValueError(
                "this Transducer has no CTC head: build it with ctc_weight > 0 "
                "(e.g. Transducer(..., ctc_weight=0.3)) and train it"
            )
        encoded, lengths = self.encode(inputs, training=False)
        return self.ctc_head(encoded), lengths

    def compute_loss(
        self, x: Any = None, y: Any = None, y_pred: Any = None,
        sample_weight: Any = None, training: bool = True,
    ) -> tf.Tensor:  # fmt: skip
        """The compiled loss of labels y (+ ctc_weight * CTC with a CTC head).

        RnntLoss, FusedRnntLoss or PrunedRnntLoss for an RNN-T joiner;
        TdtLoss or FusedTdtLoss for a joiner with a duration head.
        """
        loss_fn = self.loss
        durations = getattr(self.joiner, "durations", None)
        if durations is not None and not isinstance(loss_fn, TdtLoss):
            raise ValueError(
                f"the joiner has a duration head (durations={list(durations)}): "
                f"compile the Transducer with loss=TdtLoss(durations=...) or "
                f"FusedTdtLoss(durations=...), got "
                f"{type(loss_fn).__name__}"
            )
        if isinstance(loss_fn, TdtLoss) and loss_fn.durations != durations:
            raise ValueError(
                f"TdtLoss has durations={list(loss_fn.durations)} but the joiner "
                f"{'has no duration head' if durations is None else list(durations)}"
                ": build the joiner with the loss's durations"
            )
        if not isinstance(loss_fn, (RnntLoss, FusedRnntLoss, PrunedRnntLoss, TdtLoss)):
            raise ValueError(
                "compile the Transducer with loss=RnntLoss(...), FusedRnntLoss(...), "
                f"PrunedRnntLoss(...) or TdtLoss(...), got {loss_fn!r}"
            )
        labels = tf.cast(y, tf.int32)
        context = tf.concat(
            [tf.zeros_like(labels[:, :1]), tf.maximum(labels, 0)], axis=1
        )  # [blank] + labels, padding as blanks (never scored)
        decoded = self.predictor(context, training=training)
        encoded, lengths = y_pred["encoder"], y_pred["lengths"]
        if isinstance(loss_fn, PrunedRnntLoss):
            loss = loss_fn(
                y,
                dict(
                    am=self.simple_am(encoded),
                    lm=self.simple_lm(decoded),
                    encoder=self.joiner.project_encoder(encoded),
                    decoder=self.joiner.project_decoder(decoded),
                    joiner=self.joiner.joint,
                    logit_lengths=lengths,
                ),
                sample_weight,
            )
        elif isinstance(loss_fn, (FusedRnntLoss, FusedTdtLoss)):
            loss = loss_fn(
                y,
                dict(
                    encoder=self.joiner.project_encoder(encoded),
                    decoder=self.joiner.project_decoder(decoded),
                    joiner=self.joiner,
                    logit_lengths=lengths,
                ),
                sample_weight,
            )
        elif isinstance(loss_fn, TdtLoss):
            tokens, durs = self.joiner.joint_heads(
                self.joiner.project_encoder(encoded)[:, :, tf.newaxis],
                self.joiner.project_decoder(decoded)[:, tf.newaxis],
            )
            loss = loss_fn(
                y,
                dict(token_logits=tokens, duration_logits=durs, logit_lengths=lengths),
                sample_weight,
            )
        else:
            logits = self.joiner(encoded, decoded)
            logits._keras_mask = tf.sequence_mask(lengths, tf.shape(logits)[1])
            loss = loss_fn(y, logits, sample_weight)
        if self.ctc_head is not None:
            loss += self.ctc_weight * self._ctc_loss(y, y_pred, sample_weight)
        return plus_added_losses(self, loss)

    def _ctc_loss(self, y: Any, y_pred: Any, sample_weight: Any) -> tf.Tensor:
        """The CTC head's loss, reduced as the compiled transducer loss."""
        ctc = CtcLoss(
            pad_id=self.loss.pad_id, zero_infinity=True, reduction=self.loss.reduction
        )
        logits = y_pred["ctc_logits"]  # `call`'s, with a CTC head
        logits._keras_mask = tf.sequence_mask(y_pred["lengths"], tf.shape(logits)[1])
        return ctc(y, logits, sample_weight)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        serialize = keras.saving.serialize_keras_object
        config.update(
            vocab_size=self.vocab_size,
            encoder=serialize(self.encoder),
            predictor=serialize(self.predictor),
            joiner=serialize(self.joiner),
            features=None
            if self.feature_layer is None
            else serialize(self.feature_layer),
            normalization=_normalization_config(self.normalizer),
            augment=serialize(self.augment)
            if isinstance(self.augment, SpecAugment)
            else self.augment,
            feature_dim=self.feature_dim,
            ctc_weight=self.ctc_weight,
        )
        return config

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "Transducer":
        """The model of a config, this layout's or 0.1's flat one (converted)."""
        config = dict(config)
        if is_legacy(config):
            flat = split_legacy(config)
            parts = legacy_parts(flat)
            config.update(parts)
        return cls(**config)


def _feature_layer(features):
    """The LogMelSpectrogram of the `features` argument (None: features in)."""
    if features is None or isinstance(features, LogMelSpectrogram):
        return features
    if isinstance(features, Mapping) and "module" in features and "config" in features:
        return keras.saving.deserialize_keras_object(dict(features))
    if isinstance(features, Mapping):
        return LogMelSpectrogram(**features)
    raise ValueError(
        "features must be None, a LogMelSpectrogram layer or a dict of its "
        f"arguments, got {features!r}"
    )


def _normalizer(normalization):
    """The FeatureNormalization of the `normalization` argument, or None."""
    if normalization is None or isinstance(normalization, FeatureNormalization):
        return normalization
    if normalization == "global":
        return FeatureNormalization("global")
    if isinstance(normalization, Mapping) and "config" in normalization:
        return keras.saving.deserialize_keras_object(dict(normalization))
    raise ValueError(
        'normalization must be None, "global" or a FeatureNormalization layer, '
        f"got {normalization!r}"
    )


def _normalization_config(normalizer):
    if normalizer is None:
        return None
    if normalizer.get_config().get("mode") == "global":
        return "global"
    return keras.saving.serialize_keras_object(normalizer)
