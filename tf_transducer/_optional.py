# SPDX-License-Identifier: Apache-2.0
"""Optional dependencies, imported when a feature needs them.

The core package needs only TensorFlow, NumPy and absl-py. Each other
dependency belongs to a pip extra; importing it through `require` fails with
an ImportError that names the extra to install.
"""

import importlib

# module -> (pip distribution, extra, what needs it)
OPTIONAL = {
    "soundfile": ("soundfile", "data", "reading audio files other than WAV"),
    "sentencepiece": ("sentencepiece", "data", "SentencePiece subword encoders"),
    "ai_edge_litert": ("ai-edge-litert", "export", "running TFLite programs"),
    "kenlm": ("kenlm", "lm", "KenLM language models"),
}


class MissingExtraError(ImportError):
    """An optional dependency is not installed; the message names its extra."""


def require(module: str):
    """Imports an optional dependency (one of OPTIONAL's keys).

    Raises:
      MissingExtraError: not installed; says which extra brings it.
    """
    if module not in OPTIONAL:
        raise ValueError(f"module must be one of {sorted(OPTIONAL)}, got {module!r}")
    try:
        return importlib.import_module(module)
    except ImportError as error:
        distribution, extra, purpose = OPTIONAL[module]
        raise MissingExtraError(
            f"{purpose} needs the {distribution!r} package ({error}): "
            f"pip install 'tf_transducer[{extra}]' (or pip install {distribution})",
            name=module,
        ) from None


def available(module: str) -> bool:
    """Whether an optional dependency can be imported."""
    try:
        require(module)
    except MissingExtraError:
        return False
    return True
