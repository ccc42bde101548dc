# SPDX-License-Identifier: Apache-2.0
"""The bundled corpora (see README.md here): paths to their folders and manifests.

They live in the repository and the source archive (for the tests, the demo
and the notebooks), not in the wheel. Nothing is ever downloaded: the files
are read from `TF_TRANSDUCER_CORPORA` when it is set, else from this package's
folder in a checkout or an unpacked source archive.
"""

import os

ENV_VAR = "TF_TRANSDUCER_CORPORA"
_HERE = os.path.dirname(os.path.abspath(__file__))

CORPORA = ("librivox", "digits", "digits_real")
MANIFESTS = {
    "librivox": "librivox/librivox.csv",
    "librivox_jsonl": "librivox/librivox.jsonl",
    "digits_train": "digits/train.csv",
    "digits_dev": "digits/dev.csv",
    "digits_test": "digits/test.csv",
    "digits_real": "digits_real/real.csv",
}


def corpora_dir() -> str:
    """The folder holding the corpora.

    $TF_TRANSDUCER_CORPORA when it is set, else this package's own folder.

    Raises:
      FileNotFoundError: the corpora are not there (an install from the
        wheel), with how to get them.
    """
    root = os.environ.get(ENV_VAR) or _HERE
    if not all(os.path.isdir(os.path.join(root, name)) for name in CORPORA):
        where = f"{ENV_VAR}={root}" if os.environ.get(ENV_VAR) else root
        raise FileNotFoundError(
            f"the bundled corpora ({', '.join(CORPORA)}) are not in {where}: "
            "the wheel leaves them out. Get them from a clone of the "
            "repository or the source archive (tf_transducer-*.tar.gz) and set "
            f"{ENV_VAR} to its tf_transducer/data/corpora folder"
        )
    return root


def path(name: str) -> str:
    """Folder of a bundled corpus: one of CORPORA."""
    if name not in CORPORA:
        raise ValueError(f"name must be one of {list(CORPORA)}, got {name!r}")
    return os.path.join(corpora_dir(), name)


def manifest(name: str) -> str:
    """Path of a bundled manifest: one of MANIFESTS' keys."""
    if name not in MANIFESTS:
        raise ValueError(f"no bundled manifest {name!r}; have {sorted(MANIFESTS)}")
    return os.path.join(corpora_dir(), MANIFESTS[name])
