# SPDX-License-Identifier: Apache-2.0
"""Transducer: an RNN-T model for RnntLoss, FusedRnntLoss or PrunedRnntLoss."""

import keras
import tensorflow as tf

from tf_transducer.layers import (
    FeatureNormalization,
    LogMelSpectrogram,
    PredictionNetwork,
    SpecAugment,
    TransducerEncoder,
    TransducerJoiner,
)
from tf_transducer.losses import FusedRnntLoss, PrunedRnntLoss, RnntLoss
from tf_transducer.models._inputs import (
    optimizer_step,
    plus_added_losses,
    split_inputs,
)


@keras.saving.register_keras_serializable(package="tf_transducer")
class Transducer(keras.Model):
    """An RNN transducer: encoder, prediction network, joiner (+ simple projections).

    features (or audio, with `features` set) -> [global normalisation] ->
    [SpecAugment, in training] -> TransducerEncoder -> per frame;
    [blank] + labels -> PredictionNetwork -> per label; TransducerJoiner on
    every (frame, label) pair (RnntLoss; FusedRnntLoss computes the same loss
    without ever storing the logits) or on the pruned ones (PrunedRnntLoss,
    which also trains the linear "simple" projections).

    `model(inputs)` returns {"encoder": [B, T', H], "lengths": [B]}; the loss
    is computed in `compute_loss` from those and the labels y [B, S] (padded
    with -1), so `compile(loss=RnntLoss())` (or `FusedRnntLoss()`,
    `PrunedRnntLoss()`) and `fit(dataset of ((features, lengths), labels))`
    just work.

    Args:
      vocab_size: classes including the blank (0).
      feature_dim: features per frame (ignored when `features` is given).
      features: None (features in), or a LogMelSpectrogram config dict (raw
        audio in; the features are computed inside, as in the export).
      normalization: None or "global" (FeatureNormalization, `adapt` it).
      augment: None, a SpecAugment preset name or config dict.
      encoder_units, encoder_layers, stack, encoder_dropout: TransducerEncoder.
      predictor: "lstm" or "stateless"; embedding_dim, predictor_units,
        context_size: PredictionNetwork.
      joiner_units: TransducerJoiner width.
    """

    def __init__(
        self,
        vocab_size,
        feature_dim=80,
        features=None,
        normalization=None,
        augment=None,
        encoder_units=256,
        encoder_layers=2,
        stack=3,
        encoder_dropout=0.0,
        predictor="lstm",
        embedding_dim=128,
        predictor_units=256,
        context_size=2,
        joiner_units=256,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if normalization not in (None, "global"):
            raise ValueError(
                f'normalization must be None or "global", got {normalization!r}'
            )
        self.vocab_size = vocab_size
        self.features_config = features
        self.feature_layer = LogMelSpectrogram(**features) if features else None
        self.feature_dim = self.feature_layer.n_mels if features else feature_dim
        self.normalization = normalization
        self.normalizer = FeatureNormalization("global") if normalization else None
        self.augment = augment
        self.spec_augment = SpecAugment.from_arg(augment)
        self.encoder = TransducerEncoder(
            encoder_units, encoder_layers, stack, encoder_dropout
        )
        self.predictor = PredictionNetwork(
            vocab_size, embedding_dim, predictor_units, predictor, context_size
        )
        self.joiner = TransducerJoiner(vocab_size, joiner_units)
        self.simple_am = keras.layers.Dense(vocab_size, name="simple_am")
        self.simple_lm = keras.layers.Dense(vocab_size, name="simple_lm")
        self._config = dict(
            vocab_size=vocab_size,
            feature_dim=feature_dim,
            features=features,
            normalization=normalization,
            augment=augment,
            encoder_units=encoder_units,
            encoder_layers=encoder_layers,
            stack=stack,
            encoder_dropout=encoder_dropout,
            predictor=predictor,
            embedding_dim=embedding_dim,
            predictor_units=predictor_units,
            context_size=context_size,
            joiner_units=joiner_units,
        )

    def build(self, input_shape=None):
        if self.normalizer is not None:
            self.normalizer.build((None, None, self.feature_dim))
        if self.spec_augment is not None:
            self.spec_augment.build((None, None, self.feature_dim))
        self.encoder.build((None, None, self.feature_dim))
        self.predictor.build()
        self.joiner.build((None, self.encoder.units), (None, self.predictor.units))
        self.simple_am.build((None, self.encoder.units))
        self.simple_lm.build((None, self.predictor.units))
        self.built = True

    def compile(self, *args, **kwargs):
        """keras.Model.compile; the simple projections train only with PrunedRnntLoss.

        The full losses (RnntLoss, FusedRnntLoss) do not use them.
        """
        super().compile(*args, **kwargs)
        pruned = isinstance(self.loss, PrunedRnntLoss)
        self.simple_am.trainable = self.simple_lm.trainable = pruned

    def compile_from_config(self, config):
        """Compiles a loaded model as it was saved, loss and optimizer included.

        (Keras skips this for models that override `compile`.)
        """
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:  # its variables, for the saved optimizer state
            self.optimizer.build(self.trainable_variables)

    def _split(self, inputs):
        return split_inputs(inputs, "audio" if self.feature_layer else "features")

    def features(self, inputs):
        """(normalised features [B, T, F], frames [B]) of the inputs."""
        values, lengths = self._split(inputs)
        if self.feature_layer is not None:
            values, lengths = self.feature_layer(values, lengths)
        if self.normalizer is not None:
            values, lengths = self.normalizer(values, lengths)
        return values, lengths

    def encode(self, inputs, training=None):
        """(encoded [B, T', H], lengths [B])."""
        values, lengths = self.features(inputs)
        if self.spec_augment is not None and training:
            values = self.spec_augment(
                values, lengths, training=True, step=optimizer_step(self)
            )
        return self.encoder(values, lengths, training=training)

    def call(self, inputs, training=None):
        encoded, lengths = self.encode(inputs, training=training)
        return {"encoder": encoded, "lengths": lengths}

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        """The compiled RnntLoss / FusedRnntLoss / PrunedRnntLoss of labels y."""
        loss_fn = self.loss
        if not isinstance(loss_fn, (RnntLoss, FusedRnntLoss, PrunedRnntLoss)):
            raise ValueError(
                "compile the Transducer with loss=RnntLoss(...), FusedRnntLoss(...) "
                f"or PrunedRnntLoss(...), got {loss_fn!r}"
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
        elif isinstance(loss_fn, FusedRnntLoss):
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
        else:
            logits = self.joiner(encoded, decoded)
            logits._keras_mask = tf.sequence_mask(lengths, tf.shape(logits)[1])
            loss = loss_fn(y, logits, sample_weight)
        return plus_added_losses(self, loss)

    def get_config(self):
        config = super().get_config()
        config.update(self._config)
        return config
