# SPDX-License-Identifier: Apache-2.0
"""TDT beam search in one graph, against the numpy `tdt_beam_search`.

The graph steps read the logits tables of `TdtTableSteps` (see
test_graph_greedy), so each utterance's best hypothesis and score can be
checked against the numpy search run on it alone: eagerly, traced with
unknown batch and time, under XLA, and on a Keras TDT `Transducer`.
"""

import numpy as np
import pytest
import tensorflow as tf

from tests.decoding.test_graph_greedy import DURATIONS
from tests.decoding.test_graph_greedy import table_steps
from tests.decoding.test_graph_greedy import tables
from tests.decoding.test_graph_greedy import unpad
from tests.decoding.test_tdt_decoding import TdtTableSteps
from tests.decoding.test_transducer_decoding import frames
from tf_transducer.decoding import tdt_beam_graph
from tf_transducer.decoding import tdt_beam_search
from tf_transducer.decoding import transducer_beam_graph


def check_equal(hyps, tokens, durs, lengths, beam, max_symbols):
    encoder = frames(*tokens.shape[:2])
    got = unpad(hyps)
    for b, n in enumerate(lengths):
        steps = TdtTableSteps(tokens, durs)
        labels, score = tdt_beam_search(encoder[b, :n], steps, DURATIONS, beam,
                                        max_symbols_per_frame=max_symbols)  # fmt: skip
        assert got[b] == labels, f"utterance {b}"
        np.testing.assert_allclose(hyps.scores[b], score, rtol=1e-5, atol=1e-4)
        at = np.asarray(hyps.frames)[b, : len(labels)]
        assert np.all(np.diff(at) >= 0) and np.all(at < max(n, 1))
        sure = np.asarray(hyps.confidence)[b, : len(labels)]
        assert np.all((sure >= 0) & (sure <= 1))


@pytest.mark.parametrize("beam", [1, 2, 4])
@pytest.mark.parametrize("max_symbols", [1, 2])
def test_equals_numpy_search_eagerly(beam, max_symbols):
    differs = 0
    for seed in range(4):
        tokens, durs = tables(3, 10, seed, True)
        lengths = np.array([10, 7, 0])
        steps = table_steps(tokens, durs)
        hyps = tdt_beam_graph(
            frames(3, 10), lengths, steps, DURATIONS, beam, max_symbols
        )
        check_equal(hyps, tokens, durs, lengths, beam, max_symbols)
        greedy = tdt_beam_graph(frames(3, 10), lengths, steps, DURATIONS, 1)
        differs += unpad(hyps) != unpad(greedy)
    if beam > 1:  # (the tables are varied enough that the beam matters)
        assert differs, "beam search found what beam 1 found: vary the tables"


@pytest.mark.parametrize("jit", [False, True], ids=["traced", "xla"])
def test_equals_numpy_search_compiled(jit):
    tokens, durs = tables(4, 11, 9, True)
    steps = table_steps(tokens, durs)
    search = tf.function(
        lambda e, n: tdt_beam_graph(e, n, steps, DURATIONS, 3),
        input_signature=[
            tf.TensorSpec([None, None, 2]),
            tf.TensorSpec([None], tf.int32),
        ],
        jit_compile=jit,
    )
    for batch, num, lengths in ((4, 11, [11, 2, 8, 1]), (2, 6, [6, 3])):
        hyps = search(frames(batch, num), np.array(lengths, np.int32))
        check_equal(hyps, tokens[:batch, :num], durs[:batch, :num], lengths, 3, 3)


def test_joint_runs_only_where_hypotheses_wait():
    """Durations skip frames: the joint runs on live hypotheses only, no more
    than (max_symbols + 1) * beam times a frame."""
    tokens, durs = tables(2, 10, 2, True)
    hyps = tdt_beam_graph(frames(2, 10), [10, 5], table_steps(tokens, durs),
                          DURATIONS, 2, max_symbols_per_frame=1)  # fmt: skip
    runs = np.asarray(hyps.joint_evaluations)
    assert np.all(runs > 0) and runs[0] <= 10 * 2 * 2 and runs[1] <= 5 * 2 * 2


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(beam=0), "beam must be"),
        (dict(beam=True), "beam must be"),
        (dict(durations=[0, 2]), "durations must be"),
        (dict(max_symbols_per_frame=0), "max_symbols_per_frame"),
        (dict(confidence="best"), "confidence must be"),
    ],
)
def test_bad_options_are_named(kwargs, message):
    tokens, durs = tables(1, 3, 0, True)
    args = dict(durations=DURATIONS) | kwargs
    with pytest.raises(ValueError, match=message):
        tdt_beam_graph(frames(1, 3), [3], table_steps(tokens, durs), **args)


def test_keras_tdt_transducer_equals_numpy_beam_search():
    """transducer_beam_graph decodes a TDT Transducer as transducer_beam_search,
    the encoder and the search in one XLA program."""
    import keras

    import tf_transducer as tt
    from tf_transducer.decoding import hotword_graph
    from tf_transducer.decoding import transducer_beam_search
    from tf_transducer.models import Transducer

    keras.utils.set_random_seed(6)
    model = Transducer(
        6,
        tt.layers.TransducerEncoder(16, 1, stack=2),
        tt.layers.PredictionNetwork(6, 8, 16),
        tt.layers.TransducerJoiner(6, 16, durations=[0, 1, 2]),
        feature_dim=8,
    )
    model.build()
    kernel = model.joiner.output_projection.kernel
    kernel.assign(kernel * 20.0)  # confident enough to emit labels
    features = np.random.default_rng(4).normal(size=[3, 40, 8]).astype(np.float32)
    lengths = np.array([40, 23, 9], np.int32)
    search = tf.function(lambda x, n: transducer_beam_graph(model, (x, n), beam=3),
                         jit_compile=True)  # fmt: skip
    got = unpad(search(features, lengths))
    assert got == transducer_beam_search(model, (features, lengths), beam=3)
    assert any(got), "the model emits nothing: scale its output up"
    with pytest.raises(ValueError, match="hotwords and token_lm"):
        transducer_beam_graph(
            model, (features, lengths), hotwords=hotword_graph([[1, 2]], 6)
        )
