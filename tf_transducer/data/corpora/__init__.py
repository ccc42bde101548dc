# SPDX-License-Identifier: Apache-2.0
"""The bundled corpora (see README.md here): paths to their manifests."""

import os

_HERE = os.path.dirname(os.path.abspath(__file__))

MANIFESTS = {
    "librivox": "librivox/librivox.csv",
    "librivox_jsonl": "librivox/librivox.jsonl",
    "digits_train": "digits/train.csv",
    "digits_dev": "digits/dev.csv",
    "digits_test": "digits/test.csv",
}


def manifest(name: str) -> str:
    """Path of a bundled manifest: one of MANIFESTS' keys."""
    if name not in MANIFESTS:
        raise ValueError(f"no bundled manifest {name!r}; have {sorted(MANIFESTS)}")
    return os.path.join(_HERE, MANIFESTS[name])
