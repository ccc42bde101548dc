# SPDX-License-Identifier: Apache-2.0
"""Checks an installed tf_transducer (run from outside the checkout).

Usage: python installed_check.py README.md

Runs the README's first Python example, then checks what the package
promises: the version from its metadata, the op library found and matched to
this TensorFlow, optional dependencies that name their extra, and the
corpora left out of the installed package (read from a checkout when
TF_TRANSDUCER_CORPORA points at one).
"""

import os
import re
import sys
from importlib import metadata

readme = sys.argv[1]
checkout = os.path.dirname(os.path.abspath(readme))
blocks = re.findall(r"```python\n(.*?)```", open(readme).read(), re.S)
if not blocks:
    sys.exit(f"{readme}: no Python example")
exec(compile(blocks[0], f"{readme} (first example)", "exec"), {"__name__": "readme"})
print("README's first example: ran")

import tf_transducer as tt  # noqa: E402
from tf_transducer import _optional  # noqa: E402
from tf_transducer.data import corpora  # noqa: E402

location = os.path.dirname(os.path.abspath(tt.__file__))
assert not location.startswith(checkout + os.sep), f"imported from {location}"
assert tt.__version__ == metadata.version("tf_transducer"), tt.__version__
print(f"tf_transducer {tt.__version__} from {location}")

missing = [m for m in _optional.OPTIONAL if not _optional.available(m)]
for module in missing:
    extra = _optional.OPTIONAL[module][1]
    try:
        _optional.require(module)
    except ImportError as error:
        assert f"tf_transducer[{extra}]" in str(error), str(error)
if "soundfile" in missing:  # what a user meets: reading a FLAC file
    try:
        tt.data.read_audio("speech.flac", 16000)
    except ImportError as error:
        assert "tf_transducer[data]" in str(error), str(error)
    else:
        raise AssertionError("read_audio without soundfile did not fail")
print("optional dependencies not installed, each naming its extra:", missing)

os.environ.pop(corpora.ENV_VAR, None)
try:
    corpora.manifest("digits_train")
except FileNotFoundError as error:
    assert corpora.ENV_VAR in str(error), str(error)
else:
    raise AssertionError("the installed package carries the corpora")
os.environ[corpora.ENV_VAR] = os.path.join(checkout, "tf_transducer/data/corpora")
assert os.path.isfile(corpora.manifest("digits_train"))
print("corpora: not installed; read from the checkout with", corpora.ENV_VAR)

from tf_transducer.ops import _loader  # noqa: E402

gpu_kernels = _loader.built_with_gpu_kernels()
if os.environ.get("TT_EXPECT_GPU_KERNELS") == "1":
    assert gpu_kernels, "the installed library has no GPU kernels"
print("op library:", "with" if gpu_kernels else "without", "GPU kernels")
