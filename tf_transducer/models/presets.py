# SPDX-License-Identifier: Apache-2.0
"""Transducer presets and the parts' configurations, as keras-hub keeps them.

A preset names the three parts of a `Transducer`, each as a part
configuration: {"class_name": the layer class, **its constructor
arguments} (vocab_size left out: the model's). `Transducer.from_preset(name,
vocab_size, ...)` builds one; `part_config(layer)` reads a built layer back
into that form and `build_part` builds it again, which is how run.json
(`tf_transducer.training.config.ModelConfig`) holds a model.

The presets (parameters with vocab_size=256 and feature_dim=80):

- "lstm-1m": TransducerEncoder (2 LSTMs of 256, 3x frame stacking), a
  stateless prediction network (64 / 128), joiner 128; 1,248,256
  parameters;
- "conformer-2m": ConformerEncoder (d_model 96, 6 blocks, 4 heads), an
  LSTM prediction network (64 / 192), joiner 192; 1,960,936 parameters;
- "conformer-10m": ConformerEncoder (d_model 144, 16 blocks, 4 heads), an
  LSTM prediction network (256 / 320), joiner 320; 9,497,024 parameters.

The Conformers attend in chunks of 8 encoder frames (32 feature frames:
320 ms at a 10 ms hop, the algorithmic latency) with 32 frames of left
context. "lstm-1m" is the recipe's and the demo's LSTM transducer.
"""

import copy
import inspect
from collections.abc import Mapping
from typing import Any

import keras

from tf_transducer.layers import ConformerEncoder
from tf_transducer.layers import PredictionNetwork
from tf_transducer.layers import TransducerEncoder
from tf_transducer.layers import TransducerJoiner

# class name -> class, for the parts' configurations (a layer class of one's
# own is found through Keras' registry of serialisable objects).
PART_CLASSES = {
    cls.__name__: cls
    for cls in (
        TransducerEncoder,
        ConformerEncoder,
        PredictionNetwork,
        TransducerJoiner,
    )
}
PARTS = ("encoder", "predictor", "joiner")
# Keras' own Layer arguments, not the part's: left out of part configurations.
_LAYER_KEYS = ("name", "trainable", "dtype")


def _parts(encoder: dict, predictor: dict, joiner_units: int) -> dict:
    """A preset's three part configurations."""
    return {
        "encoder": encoder,
        "predictor": dict(class_name="PredictionNetwork", **predictor),
        "joiner": dict(class_name="TransducerJoiner", units=joiner_units),
    }


def _conformer(d_model: int, num_layers: int, embedding_dim: int, units: int) -> dict:
    """A Conformer preset: chunks of 8 encoder frames, 32 of left context."""
    encoder = dict(
        class_name="ConformerEncoder", d_model=d_model, num_layers=num_layers,
        num_heads=4, conv_kernel=15, subsampling=4, chunk_size=8, left_context=32,
        dropout=0.1,
    )  # fmt: skip
    return _parts(
        encoder, dict(kind="lstm", embedding_dim=embedding_dim, units=units), units
    )


PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "lstm-1m": _parts(
        dict(class_name="TransducerEncoder", units=256, num_layers=2, stack=3),
        dict(kind="stateless", embedding_dim=64, units=128),
        128,
    ),
    "conformer-2m": _conformer(96, 6, embedding_dim=64, units=192),
    "conformer-10m": _conformer(144, 16, embedding_dim=256, units=320),
}


def preset_parts(name: str) -> dict[str, dict[str, Any]]:
    """A copy of a preset's part configurations; ValueError naming the presets."""
    if not isinstance(name, str) or name not in PRESETS:
        raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {name!r}")
    return copy.deepcopy(PRESETS[name])


def part_class(spec: Mapping[str, Any], part: str) -> type[keras.layers.Layer]:
    """The layer class a part configuration names."""
    if not isinstance(spec, Mapping) or not isinstance(spec.get("class_name"), str):
        raise ValueError(
            f"{part} must be a layer or a part configuration {{'class_name': ..., "
            f"<arguments>}}, got {spec!r}"
        )
    name = spec["class_name"]
    cls = PART_CLASSES.get(name) or keras.saving.get_registered_object(name)
    if cls is None:
        raise ValueError(
            f"{part}: unknown layer class {name!r} (known: {sorted(PART_CLASSES)}, "
            "or a class registered with keras.saving.register_keras_serializable, "
            "named 'package>Class')"
        )
    return cls


def check_arguments(part: str, spec: Mapping[str, Any]) -> None:
    """ValueError naming an argument a part configuration's class does not take.

    Builds nothing (a layer's values are checked when it is built).
    """
    cls = part_class(spec, part)
    if cls not in PART_CLASSES.values():
        return  # a class of one's own: checked when built
    known = set(inspect.signature(cls.__init__).parameters) - {"self", "kwargs"}
    unknown = sorted(set(spec) - known - {"class_name", *_LAYER_KEYS})
    if unknown:
        raise ValueError(
            f"{part} ({spec['class_name']}): unknown arguments {unknown}; it takes "
            f"{sorted(known - {'vocab_size'})}"
        )


def build_part(part: str, spec: Any, vocab_size: int) -> keras.layers.Layer:
    """The layer of a part: a layer as it is, or built from its configuration.

    Args:
      part: "encoder", "predictor" or "joiner" (named in errors).
      spec: a Keras layer; a part configuration {"class_name", **arguments};
        or a Keras serialisation (`keras.saving.serialize_keras_object`).
      vocab_size: passed to the prediction network and the joiner.
    """
    if isinstance(spec, keras.layers.Layer):
        return spec
    if isinstance(spec, Mapping) and "config" in spec and "module" in spec:
        return keras.saving.deserialize_keras_object(dict(spec))
    cls = part_class(spec, part)
    arguments = {k: v for k, v in spec.items() if k != "class_name"}
    if part != "encoder":
        arguments.setdefault("vocab_size", vocab_size)
    try:
        return cls(**arguments)
    except TypeError as error:  # an unknown argument
        raise ValueError(f"{part} ({spec['class_name']}): {error}") from None
    except ValueError as error:
        raise ValueError(f"{part} ({spec['class_name']}): {error}") from None


def part_config(layer: keras.layers.Layer) -> dict[str, Any]:
    """A layer as a part configuration: {"class_name", **constructor arguments}.

    vocab_size is left out (the model's); so are Keras' own layer arguments
    (name, trainable, dtype), so that equal parts give equal configurations.
    """
    config = {
        k: v
        for k, v in layer.get_config().items()
        if k not in _LAYER_KEYS and k != "vocab_size"
    }
    name = type(layer).__name__
    if name not in PART_CLASSES:
        name = keras.saving.get_registered_name(type(layer))
    return {"class_name": name, **config}


def merged(base: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> dict:
    """A part configuration with some arguments overridden.

    A "class_name" in the overrides replaces the part: its arguments then
    start from the overrides alone.
    """
    overrides = dict(overrides or {})
    if "class_name" in overrides and overrides["class_name"] != base["class_name"]:
        return overrides
    return {**base, **overrides}
