# SPDX-License-Identifier: Apache-2.0
"""The README's lattice example runs as written (and learns its task)."""

import os
import re

README = os.path.join(os.path.dirname(os.path.dirname(__file__)), "README.md")


def test_readme_lattice_example():
    blocks = re.findall(r"```python\n(.*?)```", open(README).read(), re.S)
    (example,) = [b for b in blocks if "RecognitionLattice(" in b]
    exec("import tf_transducer as tt\n" + example, {})  # asserts the transcripts
