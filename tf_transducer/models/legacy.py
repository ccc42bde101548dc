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


# part class and {its argument: the flat argument}, per encoder kind.
ENCODER_ARGUMENTS = {
    "lstm": ("TransducerEncoder", dict(
        units="encoder_units", num_layers="encoder_layers", stack="stack",
        dropout="encoder_dropout",
    )),
    "conformer": ("ConformerEncoder", dict(
        d_model="conformer_dim", num_layers="conformer_layers",
        num_heads="conformer_heads", conv_kernel="conformer_kernel",
        chunk_size="chunk_size", left_context="left_context",
        subsampling="subsampling", dropout="encoder_dropout",
        chunk_sizes="chunk_sizes",
    )),
}  # fmt: skip
PREDICTOR_ARGUMENTS = dict(
    embedding_dim="embedding_dim", units="predictor_units", kind="predictor",
    context_size="context_size",
)  # fmt: skip


def legacy_parts(flat: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """{"encoder", "predictor", "joiner"} part configurations of flat arguments.

    Raises:
      ValueError: an unknown encoder kind (named).
    """
    a = {**DEFAULTS, **{k: v for k, v in flat.items() if k in DEFAULTS}}
    kind = a["encoder"]
    if kind not in ENCODER_KINDS:
        raise ValueError(f'encoder must be "lstm" or "conformer", got {kind!r}')
    cls, names = ENCODER_ARGUMENTS[kind]
    return {
        "encoder": {"class_name": cls, **{new: a[old] for new, old in names.items()}},
        "predictor": {
            "class_name": "PredictionNetwork",
            **{new: a[old] for new, old in PREDICTOR_ARGUMENTS.items()},
        },
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
    encoder, predictor = parts["encoder"], parts["predictor"]
    flat = {old: encoder[new] for new, old in ENCODER_ARGUMENTS["conformer"][1].items()
            if new in encoder}  # fmt: skip
    flat.update({old: predictor[new] for new, old in PREDICTOR_ARGUMENTS.items()
                 if new in predictor})  # fmt: skip
    return dict(flat, encoder="conformer", joiner_units=parts["joiner"]["units"])


# Deprecated (0.1's name and form, kept for one release): the Conformer
# presets as flat keyword arguments, `Transducer(256, **CONFORMER_PRESETS[n])`.
# Use `Transducer.from_preset(n, 256)`.
CONFORMER_PRESETS: dict[str, dict[str, Any]] = {
    name: _flat_preset(name) for name in ("conformer-2m", "conformer-10m")
}
