# SPDX-License-Identifier: Apache-2.0
"""The token n-gram's tables against the ARPA model they come from."""

import math

import numpy as np
import pytest

from tf_transducer.decoding import ArpaModel
from tf_transducer.decoding import token_lm

# A trigram over labels 1-4 (0 is the blank; 5 never appears: <unk>), with
# back-off weights at every order and n-grams whose history lacks some.
ARPA = """
\\data\\
ngram 1=7
ngram 2=7
ngram 3=3

\\1-grams:
-1.0\t</s>
-99\t<s>\t-0.5
-0.7\t1\t-0.3
-0.6\t2\t-0.2
-0.9\t3\t-0.4
-1.1\t4
-2.0\t<unk>

\\2-grams:
-0.2\t<s> 1\t-0.1
-0.3\t1 2\t-0.25
-0.4\t2 3
-0.5\t3 </s>
-0.35\t2 1\t-0.15
-0.45\t1 1
-0.8\t4 2\t-0.05

\\3-grams:
-0.1\t<s> 1 2
-0.15\t1 2 3
-0.05\t2 1 1

\\end\\
"""


@pytest.fixture()
def arpa(tmp_path):
    path = tmp_path / "tokens.arpa"
    path.write_text(ARPA)
    return str(path)


def tables_score(lm, labels):
    state, total = lm.start, 0.0
    for label in labels:
        total += lm.logp[state, label]
        state = lm.goto[state, label]
    return total + lm.final[state], total


def arpa_score(model, labels):
    state, total = model.begin_state(), 0.0
    for label in labels:
        if label == 0:  # the blank: not a word
            continue
        log10, state = model.score(state, str(label))
        total += log10
    return (total + model.end_score(state)) * math.log(10), total * math.log(10)


def test_tables_score_sequences_as_the_arpa_model(arpa):
    lm, model = token_lm(arpa, 6), ArpaModel(arpa)
    rng = np.random.default_rng(0)
    sequences = [[1, 2, 3], [2, 1, 1, 2, 3], [4, 2, 1, 1], [5, 3, 5, 1, 2]]
    sequences += [list(rng.integers(0, 6, size=rng.integers(0, 9))) for _ in range(300)]
    for labels in sequences:
        np.testing.assert_allclose(
            tables_score(lm, labels), arpa_score(model, labels), rtol=1e-5, atol=1e-4
        )


def test_states_and_blank(arpa):
    lm = token_lm(arpa, 6)
    # (), then the n-grams shorter than the order that labels reach: <s>,
    # 1-4, and the bigrams without </s>
    assert lm.goto.shape == lm.logp.shape == (1 + 5 + 6, 6)
    assert np.all(lm.logp[:, 0] == 0)
    assert np.all(lm.goto[:, 0] == np.arange(len(lm.goto)))
    assert lm.goto.dtype == np.int32 and lm.logp.dtype == np.float32


def test_bad_arguments_are_named(arpa, tmp_path):
    with pytest.raises(ValueError, match="vocab_size"):
        token_lm(arpa, 1)
    with pytest.raises(ValueError, match="blank"):
        token_lm(arpa, 6, blank=6)
    with pytest.raises(ValueError, match="max_entries"):
        token_lm(arpa, 6, max_entries=10)
    with pytest.raises(FileNotFoundError, match="missing.arpa"):
        token_lm(str(tmp_path / "missing.arpa"), 6)
