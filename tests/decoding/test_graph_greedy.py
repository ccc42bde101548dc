# SPDX-License-Identifier: Apache-2.0
"""Label-looping greedy search in one graph, against the numpy searches.

The graph steps read the same logits tables as the numpy `TableSteps`
(joint logits table[b, t, n, last]), so every label, score and joint
evaluation of the graph search can be checked against `greedy_search` and
`tdt_greedy_search`: eagerly, traced with unknown batch and time, and
under XLA; and on a Keras `Transducer` against `transducer_greedy_decode`.
"""

import numpy as np
import pytest
import tensorflow as tf

from tests.decoding.test_tdt_decoding import TdtTableSteps
from tests.decoding.test_transducer_decoding import TableSteps
from tests.decoding.test_transducer_decoding import frames
from tests.decoding.test_transducer_decoding import log_softmax
from tf_transducer.decoding.graph_greedy import GraphSteps
from tf_transducer.decoding.graph_greedy import greedy_graph_start
from tf_transducer.decoding.graph_greedy import label_looping_continue
from tf_transducer.decoding.graph_greedy import label_looping_greedy
from tf_transducer.decoding.graph_greedy import transducer_greedy_graph
from tf_transducer.decoding.hotwords import hotword_graph
from tf_transducer.decoding.tdt import TdtGreedyState
from tf_transducer.decoding.tdt import tdt_greedy_continue
from tf_transducer.decoding.transducer import GreedyState
from tf_transducer.decoding.transducer import greedy_continue

V, N = 4, 6  # classes (0 = blank), label counts the tables tell apart
DURATIONS = [0, 1, 2, 4]


def table_steps(tokens, durs=None):
    """`GraphSteps` over the tables of `TableSteps` / `TdtTableSteps`."""
    tokens = tf.constant(tokens, tf.float32)
    durs = None if durs is None else tf.constant(durs, tf.float32)

    def predict(labels, state):
        out = tf.stack([state[0][:, 0] + 1, tf.cast(labels, tf.float32)], 1)
        return out, [out]

    def joint(encoder, decoder):
        b, t = tf.cast(encoder[:, 0], tf.int32), tf.cast(encoder[:, 1], tf.int32)
        n = tf.minimum(tf.cast(decoder[:, 0], tf.int32), N - 1)
        at = tf.stack([b, t, n, tf.cast(decoder[:, 1], tf.int32)], 1)
        if durs is None:
            return tf.gather_nd(tokens, at)
        return tf.gather_nd(tokens, at), tf.gather_nd(durs, at)

    def initial_state(batch):
        # predict(blank) from this gives TableSteps.start's [0, 0].
        return [tf.fill([batch, 2], -1.0)]

    return GraphSteps(initial_state, predict, joint)


def tables(batch, num_frames, seed, tdt):
    rng = np.random.default_rng(seed)
    tokens = (rng.normal(size=(batch, num_frames, N, V, V)) * 2).astype(np.float32)
    if not tdt:
        return tokens, None
    durs = rng.normal(size=(batch, num_frames, N, V, len(DURATIONS))) * 2
    return tokens, durs.astype(np.float32)


def reference(tokens, durs, lengths, max_symbols, hotwords=None):
    """The numpy search's state after the utterances: hyps, scores, frames,
    confidence (and the TDT's joint evaluations)."""
    encoder = frames(*tokens.shape[:2])
    if durs is None:
        search = GreedyState(TableSteps(tokens), len(tokens))
        return greedy_continue(encoder, lengths, TableSteps(tokens), search,
                               max_symbols, hotwords=hotwords)  # fmt: skip
    steps = TdtTableSteps(tokens, durs)
    search = TdtGreedyState(steps, len(tokens))
    return tdt_greedy_continue(encoder, lengths, steps, search, DURATIONS,
                               max_symbols, hotwords=hotwords)  # fmt: skip


def unpad(hyps):
    labels, count = np.asarray(hyps.labels), np.asarray(hyps.label_length)
    return [labels[b, :n].tolist() for b, n in enumerate(count)]


def check_equal(hyps, tokens, durs, lengths, max_symbols, hotwords=None):
    want = reference(tokens, durs, lengths, max_symbols, hotwords)
    assert unpad(hyps) == want.hyps
    np.testing.assert_allclose(hyps.scores, want.scores, rtol=1e-5, atol=1e-4)
    if durs is not None:
        np.testing.assert_array_equal(hyps.joint_evaluations, want.evaluations)
    count = np.asarray(hyps.label_length)
    at, sure = np.asarray(hyps.frames), np.asarray(hyps.confidence)
    for b, n in enumerate(count):  # frames: in order, inside the utterance
        assert at[b, :n].tolist() == want.frames[b]
        np.testing.assert_allclose(sure[b, :n], want.confidence[b], atol=1e-5)
        assert np.all(np.diff(at[b, :n]) >= 0) and np.all(at[b, :n] < lengths[b])
        assert np.all(at[b, n:] == -1)


@pytest.mark.parametrize("tdt", [False, True], ids=["rnnt", "tdt"])
@pytest.mark.parametrize("max_symbols", [1, 3])
@pytest.mark.parametrize("found_share", [0.1, 0.5, 1.0])
def test_equals_numpy_search_eagerly(tdt, max_symbols, found_share):
    """The labels do not depend on when the prediction network runs."""
    for seed in range(4):
        tokens, durs = tables(4, 9, seed, tdt)
        lengths = np.array([9, 6, 0, 8])
        steps = table_steps(tokens, durs)
        hyps = label_looping_greedy(
            frames(4, 9), lengths, steps, DURATIONS if tdt else None, max_symbols,
            found_share=found_share,
        )  # fmt: skip
        check_equal(hyps, tokens, durs, lengths, max_symbols)


@pytest.mark.parametrize("tdt", [False, True], ids=["rnnt", "tdt"])
def test_hotwords_equal_numpy_search(tdt):
    """Boosted choices, automaton states and scores as the numpy search's."""
    rng = np.random.default_rng(2)
    for seed in range(3):
        tokens, durs = tables(3, 9, seed, tdt)
        phrases = [list(rng.integers(1, V, size=rng.integers(1, 4))) for _ in range(3)]
        graph = hotword_graph(phrases, V, scores=0.8)
        lengths = np.array([9, 6, 2])
        # (no take-back at the end here: the numpy state is compared as is)
        hyps, _ = label_looping_continue(
            frames(3, 9), lengths, table_steps(tokens, durs),
            greedy_graph_start(table_steps(tokens, durs), 3),
            DURATIONS if tdt else None, hotwords=graph,
        )  # fmt: skip
        check_equal(hyps, tokens, durs, lengths, 3, hotwords=graph)


@pytest.mark.parametrize("tdt", [False, True], ids=["rnnt", "tdt"])
@pytest.mark.parametrize("jit", [False, True], ids=["traced", "xla"])
def test_equals_numpy_search_compiled(tdt, jit):
    """One trace with unknown batch and time decodes batches of every shape."""
    tokens, durs = tables(4, 11, 7, tdt)
    steps = table_steps(tokens, durs)
    search = tf.function(
        lambda e, n: label_looping_greedy(e, n, steps, DURATIONS if tdt else None),
        input_signature=[
            tf.TensorSpec([None, None, 2]),
            tf.TensorSpec([None], tf.int32),
        ],
        jit_compile=jit,
    )
    for batch, num, lengths in ((4, 11, [11, 3, 7, 1]), (2, 5, [5, 4])):
        hyps = search(frames(batch, num), np.array(lengths, np.int32))
        cut = None if durs is None else durs[:batch, :num]
        check_equal(hyps, tokens[:batch, :num], cut, np.array(lengths), 3)


def test_confidence_of_each_label():
    """max_prob: the emitted label's probability; entropy: 1 - H / log V."""
    tokens, _ = tables(1, 6, 3, False)
    lengths = np.array([6])
    steps = table_steps(tokens)
    by_max = label_looping_greedy(frames(1, 6), lengths, steps, confidence="max_prob")
    by_entropy = label_looping_greedy(frames(1, 6), lengths, steps)
    labels = unpad(by_max)[0]
    assert labels, "the table emits nothing: pick another seed"
    n, last = 0, 0
    for i, (label, t) in enumerate(
        zip(labels, np.asarray(by_max.frames)[0], strict=False)
    ):
        lp = log_softmax(tokens[0, t, min(n, N - 1), last])
        assert int(lp.argmax()) == label
        np.testing.assert_allclose(by_max.confidence[0, i], np.exp(lp.max()), rtol=1e-5)
        entropy = -(np.exp(lp) * lp).sum()
        np.testing.assert_allclose(
            by_entropy.confidence[0, i], 1 - entropy / np.log(V), rtol=1e-5
        )
        n, last = n + 1, label
    assert np.all(np.asarray(by_max.confidence)[0, len(labels) :] == 0)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_symbols_per_frame": 0}, "max_symbols_per_frame"),
        ({"confidence": "margin"}, "confidence"),
        ({"blank": -1}, "blank"),
        ({"durations": [1, 2]}, "durations"),
        ({"found_share": 0.0}, "found_share"),
        ({"found_share": 1.5}, "found_share"),
    ],
)
def test_bad_options_are_named(kwargs, message):
    tokens, _ = tables(1, 3, 0, False)
    with pytest.raises(ValueError, match=message):
        label_looping_greedy(frames(1, 3), [3], table_steps(tokens), **kwargs)


def test_bad_encoder_rank_is_named():
    tokens, _ = tables(1, 3, 0, False)
    with pytest.raises(ValueError, match="encoder must be"):
        label_looping_greedy(frames(1, 3)[0], [3], table_steps(tokens))


@pytest.mark.parametrize("durations", [None, [0, 1, 2]], ids=["rnnt", "tdt"])
def test_keras_transducer_equals_numpy_decode(durations):
    """The encoder and the search in one XLA program, on a Keras Transducer."""
    import keras

    import tf_transducer as tt
    from tf_transducer.decoding import transducer_greedy_decode
    from tf_transducer.models import Transducer

    keras.utils.set_random_seed(3)
    model = Transducer(
        6,
        tt.layers.TransducerEncoder(16, 1, stack=2),
        tt.layers.PredictionNetwork(6, 8, 16),
        tt.layers.TransducerJoiner(6, 16, durations=durations),
        feature_dim=8,
    )
    model.build()
    scale = model.joiner.output_projection.kernel
    scale.assign(scale * 20.0)  # confident enough to emit labels
    rng = np.random.default_rng(0)
    features = rng.normal(size=[3, 40, 8]).astype(np.float32)
    lengths = np.array([40, 25, 9], np.int32)
    search = tf.function(lambda x, n: transducer_greedy_graph(model, (x, n)),
                         jit_compile=True)  # fmt: skip
    got = unpad(search(features, lengths))
    assert got == transducer_greedy_decode(model, (features, lengths))
    assert any(got), "the model emits nothing: scale its output up"


@pytest.mark.parametrize("tdt", [False, True], ids=["rnnt", "tdt"])
@pytest.mark.parametrize("chunk", [1, 3, 4])
def test_chunk_by_chunk_equals_whole(tdt, chunk):
    """A stream of chunks (state carried; a TDT duration may jump past a
    chunk's end) decodes as the whole utterances do."""
    tokens, durs = tables(2, 10, 11, tdt)
    lengths = np.array([10, 7])
    steps, durations = table_steps(tokens, durs), DURATIONS if tdt else None
    whole = label_looping_greedy(frames(2, 10), lengths, steps, durations)
    state = greedy_graph_start(steps, 2)
    labels, frames_at, score = [[], []], [[], []], np.zeros(2)
    for start in range(0, 10, chunk):
        piece = frames(2, 10)[:, start : start + chunk]
        valid = np.clip(lengths - start, 0, piece.shape[1])
        hyps, state = label_looping_continue(piece, valid, steps, state, durations)
        for b, n in enumerate(np.asarray(hyps.label_length)):
            labels[b] += np.asarray(hyps.labels)[b, :n].tolist()
            frames_at[b] += (np.asarray(hyps.frames)[b, :n] + start).tolist()
        score += hyps.scores
    assert labels == unpad(whole)
    for b, n in enumerate(np.asarray(whole.label_length)):
        assert frames_at[b] == np.asarray(whole.frames)[b, :n].tolist()
    np.testing.assert_allclose(score, whole.scores, rtol=1e-5)
