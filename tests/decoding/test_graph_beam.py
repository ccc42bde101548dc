# SPDX-License-Identifier: Apache-2.0
"""Modified beam search in one graph, against the numpy `modified_beam_search`.

The graph steps read the logits tables of `TableSteps` (see
test_graph_greedy), so each utterance's best hypothesis and score can be
checked against the numpy search run on it alone.
"""

import numpy as np
import pytest
import tensorflow as tf

from tests.decoding.test_graph_greedy import V
from tests.decoding.test_graph_greedy import table_steps
from tests.decoding.test_graph_greedy import tables
from tests.decoding.test_graph_greedy import unpad
from tests.decoding.test_transducer_decoding import TableSteps
from tests.decoding.test_transducer_decoding import frames
from tf_transducer.decoding import beam_graph_start
from tf_transducer.decoding import hotword_graph
from tf_transducer.decoding import modified_beam_continue
from tf_transducer.decoding import modified_beam_search
from tf_transducer.decoding import token_lm
from tf_transducer.decoding.graph_beam import modified_beam_graph
from tf_transducer.decoding.graph_beam import transducer_beam_graph

# A trigram over labels 1-3 of the tables (back-off at each order).
ARPA = """\\data\\
ngram 1=5
ngram 2=4
ngram 3=1

\\1-grams:
-0.8\t</s>
-99\t<s>\t-0.3
-0.3\t1\t-0.2
-0.9\t2\t-0.4
-0.6\t3\t-0.1

\\2-grams:
-0.1\t<s> 3\t-0.2
-0.2\t1 1
-1.5\t3 2\t-0.3
-0.05\t2 3

\\3-grams:
-0.02\t<s> 3 3

\\end\\
"""


def check_equal(hyps, tokens, lengths, beam, **fusion):
    steps = TableSteps(tokens)
    encoder = frames(*tokens.shape[:2])
    got = unpad(hyps)
    for b, n in enumerate(lengths):
        labels, score = modified_beam_search(encoder[b, :n], steps, beam, **fusion)
        assert got[b] == labels, f"utterance {b}"
        np.testing.assert_allclose(hyps.scores[b], score, rtol=1e-5, atol=1e-4)
        at = np.asarray(hyps.frames)[b, : len(labels)]
        assert np.all(np.diff(at) > 0) and np.all(at < max(n, 1))


@pytest.mark.parametrize("beam", [1, 2, 4])
def test_equals_numpy_search_eagerly(beam):
    # (12 frames: long enough that growths merging into stays change the
    # best hypothesis of some of these tables, so keeping them is caught.)
    for seed in range(4, 8):
        tokens, _ = tables(3, 12, seed, False)
        lengths = np.array([12, 9, 0])
        hyps = modified_beam_graph(frames(3, 12), lengths, table_steps(tokens), beam)
        check_equal(hyps, tokens, lengths, beam)


@pytest.mark.parametrize("jit", [False, True], ids=["traced", "xla"])
def test_equals_numpy_search_compiled(jit):
    tokens, _ = tables(4, 10, 5, False)
    steps = table_steps(tokens)
    search = tf.function(
        lambda e, n: modified_beam_graph(e, n, steps, 3),
        input_signature=[
            tf.TensorSpec([None, None, 2]),
            tf.TensorSpec([None], tf.int32),
        ],
        jit_compile=jit,
    )
    for batch, num, lengths in ((4, 10, [10, 2, 7, 1]), (2, 6, [6, 3])):
        hyps = search(frames(batch, num), np.array(lengths, np.int32))
        check_equal(hyps, tokens[:batch, :num], np.array(lengths), 3)


@pytest.fixture()
def trigram(tmp_path):
    path = tmp_path / "tokens.arpa"
    path.write_text(ARPA)
    return token_lm(str(path), V)


@pytest.mark.parametrize("jit", [None, False, True], ids=["eager", "traced", "xla"])
def test_token_lm_fusion_equals_numpy_search(trigram, jit):
    """The fused scores and choices, and the n-gram changes some."""
    fusion = dict(token_lm=trigram, lm_scale=2.0)

    def search(e, n):
        return modified_beam_graph(e, n, steps, 3, **fusion)

    changed = 0
    for seed in range(4, 8):
        tokens, _ = tables(3, 12, seed, False)
        steps, lengths = table_steps(tokens), np.array([12, 9, 0], np.int32)
        run = search if jit is None else tf.function(search, jit_compile=jit)
        hyps = run(frames(3, 12), lengths)
        check_equal(hyps, tokens, lengths, 3, **fusion)
        plain = modified_beam_graph(frames(3, 12), lengths, steps, 3)
        changed += unpad(hyps) != unpad(plain)
    assert changed, "the n-gram changed no hypothesis: make it stronger"


def test_bad_token_lm_is_named(trigram):
    tokens, _ = tables(1, 3, 0, False)
    with pytest.raises(ValueError, match="token_lm must be"):
        modified_beam_graph(frames(1, 3), [3], table_steps(tokens), token_lm="x.arpa")
    with pytest.raises(ValueError, match="lm_scale"):
        modified_beam_graph(
            frames(1, 3), [3], table_steps(tokens), token_lm=trigram, lm_scale=-1
        )


def test_bad_beam_is_named():
    tokens, _ = tables(1, 3, 0, False)
    with pytest.raises(ValueError, match="beam must be"):
        modified_beam_graph(frames(1, 3), [3], table_steps(tokens), beam=0)


def small_transducer(seed, sharpen):
    """A 6-class Keras RNN-T with random weights, its output layer scaled up
    (sharper choices)."""
    import keras

    import tf_transducer as tt
    from tf_transducer.models import Transducer

    keras.utils.set_random_seed(seed)
    model = Transducer(
        6,
        tt.layers.TransducerEncoder(16, 1, stack=2),
        tt.layers.PredictionNetwork(6, 8, 16),
        tt.layers.TransducerJoiner(6, 16),
        feature_dim=8,
    )
    model.build()
    kernel = model.joiner.output_projection.kernel
    kernel.assign(kernel * sharpen)
    return model


def test_keras_transducer_equals_numpy_beam_search():
    from tf_transducer.decoding import transducer_beam_search

    model = small_transducer(4, 20.0)
    rng = np.random.default_rng(1)
    features = rng.normal(size=[3, 40, 8]).astype(np.float32)
    lengths = np.array([40, 22, 9], np.int32)
    search = tf.function(lambda x, n: transducer_beam_graph(model, (x, n), beam=3),
                         jit_compile=True)  # fmt: skip
    got = unpad(search(features, lengths))
    assert got == transducer_beam_search(model, (features, lengths), beam=3)
    assert any(got)


def test_keras_transducer_with_token_lm(tmp_path):
    """transducer_beam_graph and transducer_beam_search fuse the n-gram alike."""
    from tf_transducer.decoding import transducer_beam_search

    model = small_transducer(5, 10.0)
    path = tmp_path / "tokens.arpa"
    path.write_text(ARPA)
    fusion = dict(token_lm=token_lm(str(path), 6), lm_scale=1.5)
    features = np.random.default_rng(2).normal(size=[3, 30, 8]).astype(np.float32)
    lengths = np.array([30, 17, 8], np.int32)
    got = unpad(transducer_beam_graph(model, (features, lengths), beam=3, **fusion))
    assert got == transducer_beam_search(model, (features, lengths), 3, **fusion)
    with pytest.raises(ValueError, match="modified beam search of an RNN-T"):
        transducer_beam_search(model, (features, lengths), 3, "standard", **fusion)
    with pytest.raises(ValueError, match="made for 4 classes"):
        transducer_beam_graph(
            model, (features, lengths), token_lm=token_lm(str(path), 4)
        )


@pytest.mark.parametrize("chunk", [1, 4, 5])
@pytest.mark.parametrize("traced", [False, True], ids=["eager", "traced"])
def test_chunk_by_chunk_equals_whole(trigram, chunk, traced):
    """A stream fed in chunks (hotwords and the n-gram carried over) is
    decoded as the whole utterance: labels, frames, confidence, scores."""
    rng = np.random.default_rng(3)
    phrases = [list(rng.integers(1, V, size=2)) for _ in range(2)]
    fusion = dict(hotwords=hotword_graph(phrases, V, scores=0.7), token_lm=trigram)
    tokens, _ = tables(3, 12, 6, False)
    steps, lengths = table_steps(tokens), np.array([12, 9, 0], np.int32)
    encoder = frames(3, 12)
    whole = modified_beam_graph(encoder, lengths, steps, 3, **fusion)

    def more(e, n, state):
        return modified_beam_continue(e, n, steps, state, **fusion)

    if traced:
        more = tf.function(more, reduce_retracing=True)
    state = beam_graph_start(steps, 3, 3, **fusion)
    for start in range(0, 12, chunk):
        piece = np.clip(lengths - start, 0, chunk).astype(np.int32)
        hyps, state = more(encoder[:, start : start + chunk], piece, state)
    assert unpad(hyps) == unpad(whole)
    for name in ("scores", "frames", "confidence"):
        np.testing.assert_allclose(
            getattr(hyps, name), getattr(whole, name), rtol=1e-5, atol=1e-5
        )
    np.testing.assert_array_equal(state.offset, lengths)
