# SPDX-License-Identifier: Apache-2.0
"""Transducer: an RNN-T model for RnntLoss, FusedRnntLoss or PrunedRnntLoss."""

from typing import Any

import keras
import tensorflow as tf

from tf_transducer._checks import check_positive, float_values, resolve_lengths
from tf_transducer.layers import (
    ConformerEncoder,
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

ENCODERS = ("lstm", "conformer")

# Streaming Conformer transducers: Transducer(vocab_size, feature_dim,
# **CONFORMER_PRESETS[name]). Chunks of 8 encoder frames = 32 feature frames
# (320 ms at a 10 ms hop: the algorithmic latency), 32 frames of left context.
# Parameters with vocab_size=256 and feature_dim=80: see Transducer.
CONFORMER_PRESETS: dict[str, dict[str, Any]] = {
    "conformer-2m": dict(
        encoder="conformer",
        conformer_dim=96,
        conformer_layers=6,
        conformer_heads=4,
        conformer_kernel=15,
        subsampling=4,
        chunk_size=8,
        left_context=32,
        encoder_dropout=0.1,
        predictor="lstm",
        embedding_dim=64,
        predictor_units=192,
        joiner_units=192,
    ),
    "conformer-10m": dict(
        encoder="conformer",
        conformer_dim=144,
        conformer_layers=16,
        conformer_heads=4,
        conformer_kernel=15,
        subsampling=4,
        chunk_size=8,
        left_context=32,
        encoder_dropout=0.1,
        predictor="lstm",
        embedding_dim=256,
        predictor_units=320,
        joiner_units=320,
    ),
}


@keras.saving.register_keras_serializable(package="tf_transducer")
class Transducer(keras.Model):
    """An RNN transducer: encoder, prediction network, joiner (+ simple projections).

    features (or audio, with `features` set) -> [global normalisation] ->
    [SpecAugment, in training] -> encoder (TransducerEncoder, LSTMs, or
    ConformerEncoder, a chunk-masked streaming Conformer) -> per frame;
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
      encoder_units, encoder_layers, stack: TransducerEncoder (encoder="lstm").
      encoder_dropout: the encoder's dropout (either encoder).
      predictor: "lstm" or "stateless"; embedding_dim, predictor_units,
        context_size: PredictionNetwork.
      joiner_units: TransducerJoiner width.
      encoder: "lstm" (TransducerEncoder) or "conformer" (ConformerEncoder);
        the other encoder's arguments are ignored.
      conformer_dim, conformer_layers, conformer_heads, conformer_kernel:
        ConformerEncoder's d_model, num_layers, num_heads and conv_kernel.
      subsampling: the Conformer's feature frames per encoder frame (2, 4
        or 8; `stack` is the LSTM encoder's).
      chunk_size, left_context, chunk_sizes: ConformerEncoder's attention
        chunk and left context, in encoder frames, and the chunk sizes drawn
        from in training (None: always chunk_size).

    `CONFORMER_PRESETS` (this module) holds Conformer sizes as keyword
    arguments, `Transducer(256, **CONFORMER_PRESETS["conformer-10m"])`;
    with vocab_size=256 and feature_dim=80, "conformer-2m" has 1,960,936
    parameters and "conformer-10m" 9,497,024.
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
        encoder="lstm",
        conformer_dim=144,
        conformer_layers=4,
        conformer_heads=4,
        conformer_kernel=15,
        subsampling=4,
        chunk_size=8,
        left_context=32,
        chunk_sizes=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if normalization not in (None, "global"):
            raise ValueError(
                f'normalization must be None or "global", got {normalization!r}'
            )
        if not isinstance(encoder, str) or encoder not in ENCODERS:
            raise ValueError(f'encoder must be "lstm" or "conformer", got {encoder!r}')
        self.vocab_size = vocab_size
        self.features_config = features
        self.feature_layer = LogMelSpectrogram(**features) if features else None
        self.feature_dim = self.feature_layer.n_mels if features else feature_dim
        self.normalization = normalization
        self.normalizer = FeatureNormalization("global") if normalization else None
        self.augment = augment
        self.spec_augment = SpecAugment.from_arg(augment)
        self.encoder_kind = encoder
        if encoder == "lstm":
            self.encoder = TransducerEncoder(
                encoder_units, encoder_layers, stack, encoder_dropout
            )
        else:
            self.encoder = _conformer(
                conformer_dim, conformer_layers, conformer_heads, conformer_kernel,
                subsampling, chunk_size, left_context, chunk_sizes, encoder_dropout,
            )  # fmt: skip
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
            encoder=encoder,
            conformer_dim=conformer_dim,
            conformer_layers=conformer_layers,
            conformer_heads=conformer_heads,
            conformer_kernel=conformer_kernel,
            subsampling=subsampling,
            chunk_size=chunk_size,
            left_context=left_context,
            chunk_sizes=chunk_sizes,
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

    def stream_encode(
        self, inputs: Any, chunk_frames: int | None = None
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """`encode` (inference) as a stream: encoder.step over feature chunks.

        The features (zeros past the lengths) are cut into chunks of
        `chunk_frames` frames (the last one padded with zeros) and encoded
        one after the other with the encoder's states carried, as a
        streaming runtime does. The LSTM
        encoder streams exactly; the Conformer's chunk-masked attention
        does when chunk_frames = chunk_size * subsampling (its default;
        n * subsampling frames equal the offline call with chunk_size=n).

        Args:
          inputs: as `call`'s (features or audio, optional lengths).
          chunk_frames: feature frames per step, a positive multiple of the
            encoder's subsampling (default: chunk_size * subsampling for the
            Conformer, 4 * stack for the LSTMs).

        Returns:
          (encoded [B, ceil(T / subsampling), H], 0 past the lengths;
          lengths [B]), as `encode(inputs, training=False)`. Eager only.
        """
        stack = self.encoder.stack
        if chunk_frames is None:
            size = self.encoder.chunk_size if self.encoder_kind == "conformer" else 4
            chunk_frames = size * stack
        if (
            not isinstance(chunk_frames, int)
            or isinstance(chunk_frames, bool)
            or chunk_frames <= 0
            or chunk_frames % stack
        ):
            raise ValueError(
                f"chunk_frames must be a positive multiple of the encoder's "
                f"subsampling ({stack}), got {chunk_frames!r}"
            )
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
            if self.encoder_kind == "conformer":
                count = tf.clip_by_value(lengths - c * chunk_frames, 0, chunk_frames)
                encoded, states = self.encoder.step(chunk, states, count)
            else:
                encoded, states = self.encoder.step(chunk, states)
            outputs.append(encoded)
        out_lengths = (lengths + stack - 1) // stack
        encoded = tf.concat(outputs, axis=1)[:, : -(-frames // stack)]
        mask = tf.sequence_mask(out_lengths, tf.shape(encoded)[1], encoded.dtype)
        return encoded * mask[..., None], out_lengths

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


def _conformer(
    dim, layers, heads, kernel, subsampling, chunk_size, left_context, chunk_sizes,
    dropout,
):  # fmt: skip
    """The ConformerEncoder of the Transducer's arguments, named as they are."""
    check_positive("conformer_dim", dim, int)
    check_positive("conformer_layers", layers, int)
    check_positive("conformer_heads", heads, int)
    if dim % heads:
        raise ValueError(
            f"conformer_heads must divide conformer_dim ({dim}), got {heads}"
        )
    if not isinstance(kernel, int) or isinstance(kernel, bool) or kernel < 2:
        raise ValueError(f"conformer_kernel must be an int >= 2, got {kernel!r}")
    if not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
        raise ValueError(f"encoder_dropout must lie in [0, 1), got {dropout!r}")
    return ConformerEncoder(
        dim, layers, heads, conv_kernel=kernel, chunk_size=chunk_size,
        left_context=left_context, subsampling=subsampling, dropout=dropout,
        chunk_sizes=chunk_sizes,
    )  # fmt: skip
