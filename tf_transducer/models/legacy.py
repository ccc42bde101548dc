# SPDX-License-Identifier: Apache-2.0
"""The Transducer's flat layout of release 0.1, read into its parts.

In 0.1 `Transducer` took 24 flat keyword arguments (`encoder="lstm"` or
`"conformer"`, `encoder_units`, `conformer_dim`, `predictor_units`, ...)
and saved them in its Keras config. `.keras` files of that layout (and
`run.json` files of the recipe then) still load: `legacy_parts` turns the
flat arguments into the three part configurations of
`tf_transducer.models.presets`, with the layers' attribute names and
construction unchanged, so that the saved weights load into them.
"""

from collections.abc import Mapping
from typing import Any

# The flat arguments and their defaults in the old signature.
DEFAULTS: dict[str, Any] = dict(
    encoder="lstm",
    encoder_units=256,
    encoder_layers=2,
    stack=3,
    encoder_dropout=0.0,
    predictor="lstm",
    embedding_dim=128,
    predictor_units=256,
    context_size=2,
    joiner_units=256,
    conformer_dim=144,
    conformer_layers=4,
    conformer_heads=4,
    conformer_kernel=15,
    subsampling=4,
    chunk_size=8,
    left_context=32,
    chunk_sizes=None,
)
ENCODER_KINDS = ("lstm", "conformer")


# "encoder" and "predictor" name parts in the new layout too (as layers or
# configurations); in the flat one they are strings.
_KINDS = ("encoder", "predictor")


def is_legacy(config: Mapping[str, Any]) -> bool:
    """Whether a Transducer config (or keyword arguments) has the flat layout."""
    return any(isinstance(config.get(key), str) for key in _KINDS) or any(
        key in config for key in DEFAULTS if key not in _KINDS
    )


def legacy_parts(flat: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """{"encoder", "predictor", "joiner"} part configurations of flat arguments.

    Raises:
      ValueError: an unknown encoder kind (named).
    """
    a = {**DEFAULTS, **{k: v for k, v in flat.items() if k in DEFAULTS}}
    kind = a["encoder"]
    if kind not in ENCODER_KINDS:
        raise ValueError(f'encoder must be "lstm" or "conformer", got {kind!r}')
    encoders = {
        "lstm": dict(
            class_name="TransducerEncoder",
            units=a["encoder_units"],
            num_layers=a["encoder_layers"],
            stack=a["stack"],
            dropout=a["encoder_dropout"],
        ),
        "conformer": dict(
            class_name="ConformerEncoder",
            d_model=a["conformer_dim"],
            num_layers=a["conformer_layers"],
            num_heads=a["conformer_heads"],
            conv_kernel=a["conformer_kernel"],
            chunk_size=a["chunk_size"],
            left_context=a["left_context"],
            subsampling=a["subsampling"],
            dropout=a["encoder_dropout"],
            chunk_sizes=a["chunk_sizes"],
        ),
    }
    return {
        "encoder": encoders[kind],
        "predictor": dict(
            class_name="PredictionNetwork",
            embedding_dim=a["embedding_dim"],
            units=a["predictor_units"],
            kind=a["predictor"],
            context_size=a["context_size"],
        ),
        "joiner": dict(class_name="TransducerJoiner", units=a["joiner_units"]),
    }


def split_legacy(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Pops the flat arguments out of kwargs (or a config); returns them."""
    return {
        key: kwargs.pop(key)
        for key in list(kwargs)
        if key in DEFAULTS and (key not in _KINDS or isinstance(kwargs[key], str))
    }


def _flat_preset(name: str) -> dict[str, Any]:
    """A Conformer preset as 0.1's flat keyword arguments."""
    from tf_transducer.models.presets import PRESETS

    parts = PRESETS[name]
    e, p, j = parts["encoder"], parts["predictor"], parts["joiner"]
    return dict(
        encoder="conformer",
        conformer_dim=e["d_model"],
        conformer_layers=e["num_layers"],
        conformer_heads=e["num_heads"],
        conformer_kernel=e["conv_kernel"],
        subsampling=e["subsampling"],
        chunk_size=e["chunk_size"],
        left_context=e["left_context"],
        encoder_dropout=e["dropout"],
        predictor=p["kind"],
        embedding_dim=p["embedding_dim"],
        predictor_units=p["units"],
        joiner_units=j["units"],
    )


# Deprecated (0.1's name and form, kept for one release): the Conformer
# presets as flat keyword arguments, `Transducer(256, **CONFORMER_PRESETS[n])`.
# Use `Transducer.from_preset(n, 256)`.
CONFORMER_PRESETS: dict[str, dict[str, Any]] = {
    name: _flat_preset(name) for name in ("conformer-2m", "conformer-10m")
}
