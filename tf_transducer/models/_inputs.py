# SPDX-License-Identifier: Apache-2.0
"""What the models share: their inputs, the optimizer step, compute_loss's tail.

Inputs are values alone, (values, lengths) or a dict.
"""

from typing import Any

import keras
import tensorflow as tf


def split_inputs(inputs: Any, key: str) -> tuple[Any, tf.Tensor]:
    """(values, int32 lengths [B]) of model inputs.

    inputs: values [B, T, ...]; (values, lengths); or a dict with `key`
    ("features" or "audio") and optionally "lengths". Missing lengths mean
    all T.
    """
    if isinstance(inputs, dict):
        values, lengths = inputs.get(key), inputs.get("lengths")
    elif isinstance(inputs, (list, tuple)):
        values, lengths = inputs if len(inputs) == 2 else (inputs[0], None)
    else:
        values, lengths = inputs, None
    if lengths is None:
        lengths = tf.fill(tf.shape(values)[:1], tf.shape(values)[1])
    return values, tf.cast(lengths, tf.int32)


def encoded_shape(input_shape: Any, encoder: Any) -> Any:
    """The shape of the frames an (optional) encoder makes from model inputs.

    The inputs' shape is given as values, (values, lengths) or a dict; the
    encoder is built on the way.
    """
    shape = input_shape
    if isinstance(shape, dict):
        shape = shape["features"]
    elif isinstance(shape, (list, tuple)) and isinstance(shape[0], (list, tuple)):
        shape = shape[0]
    shape = tuple(shape)
    if encoder is None:
        return shape
    if not encoder.built:  # (a loaded model's encoder is built already)
        encoder.build(shape)
    return encoder.compute_output_shape(shape)


def optimizer_step(model: Any) -> Any:
    """The steps a compiled model's optimizer has taken (None before `compile`).

    SpecAugment's warm-ups count this training step, so that a resumed run
    carries on where it stopped.
    """
    optimizer = getattr(model, "optimizer", None)
    return None if optimizer is None else optimizer.iterations


def plus_added_losses(model: Any, loss: tf.Tensor) -> tf.Tensor:
    """loss + the model's added losses (regularisers, `add_loss`).

    The tail of every `compute_loss` here, as Keras's own.
    """
    for extra in model.losses:
        loss = loss + tf.cast(tf.reduce_sum(extra), loss.dtype)
    return loss


def deserialized(value: Any) -> Any:
    """A part given to a model's __init__: a Keras serialisation is rebuilt."""
    if isinstance(value, dict):  # from a saved config
        return keras.saving.deserialize_keras_object(value)
    return value


def serialized(value: Any) -> Any:
    """A part for get_config: None stays None."""
    return None if value is None else keras.saving.serialize_keras_object(value)


def with_parts(config: dict[str, Any], model: Any, *names: str) -> dict[str, Any]:
    """A model's config with its parts `names` serialised (get_config's tail)."""
    return {**config, **{name: serialized(getattr(model, name)) for name in names}}


def encoded(encoder: Any, inputs: Any, training: bool | None) -> tuple[Any, tf.Tensor]:
    """(an optional encoder's frames [B, T, D], lengths [B]) of model inputs."""
    values, lengths = split_inputs(inputs, "features")
    if encoder is not None:
        values = encoder(values, training=training)
    return values, lengths
