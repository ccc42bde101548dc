# SPDX-License-Identifier: Apache-2.0
"""A tiny ARPA language model shared by the CTC and transducer decoding tests."""

import pytest

# probability <tab> words <tab> back-off (log10): "a cat" is the likely text,
# "cab" a known but unlikely word after "a".
ARPA = "\n".join(
    [
        "\\data\\",
        "ngram 1=6",
        "ngram 2=3",
        "",
        "\\1-grams:",
        "-1.0\t<s>\t-0.5",
        "-1.0\t</s>",
        "-0.7\ta\t-0.3",
        "-0.9\tcat\t-0.2",
        "-0.9\tcab\t-0.2",
        "-3.0\t<unk>",
        "",
        "\\2-grams:",
        "-0.2\t<s> a",
        "-0.1\ta cat",
        "-0.3\tcat </s>",
        "",
        "\\end\\",
        "",
    ]
)


@pytest.fixture
def arpa(tmp_path):
    path = tmp_path / "lm.arpa"
    path.write_text(ARPA)
    return str(path)
