# SPDX-License-Identifier: Apache-2.0
"""Context dependencies and alignment lattices, one frame at a time."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from tf_transducer.lattice.alignments import FrameDependent
from tf_transducer.lattice.alignments import FrameLabelDependent
from tf_transducer.lattice.alignments import check_num_weights
from tf_transducer.lattice.alignments import shift_down
from tf_transducer.lattice.contexts import FullNGram
from tf_transducer.lattice.contexts import NextStateTable
from tf_transducer.lattice.semirings import Cartesian
from tf_transducer.lattice.semirings import Log
from tf_transducer.lattice.semirings import MaxTropical
from tf_transducer.lattice.semirings import Real


def test_full_ngram_state_numbering():
    ctx = FullNGram(vocab_size=3, context_size=2)
    assert ctx.shape() == (1 + 3 + 9, 3) and ctx.start() == 0

    def step(state, label):
        return int(ctx.next_state(tf.constant(state), tf.constant(label)))

    assert step(0, 2) == 2  # unigram "2" is state 2
    assert step(2, 3) == 4 + (2 - 1) * 3 + (3 - 1)  # bigram (2, 3): state 9
    assert step(9, 1) == 4 + (3 - 1) * 3 + (1 - 1)  # (2, 3, 1) keeps (3, 1): 10
    assert step(9, 0) == 9  # epsilon: no move
    np.testing.assert_array_equal(
        ctx.walk_states(tf.constant([[2, 3, 1], [1, 0, 1]])),
        [[0, 2, 9, 10], [0, 1, 1, 4]],
    )
    assert FullNGram(5, 0).shape() == (1, 5)
    assert int(FullNGram(5, 0).next_state(tf.constant(0), tf.constant(4))) == 0


def brute_reduce(table, weights, semiring):
    """result[q] = semiring sum of weights[p, y] over next[p, y] == q."""
    S, V = table.shape
    out = []
    for q in range(S):
        picked = [
            weights[..., p, y] for p in range(S) for y in range(V) if table[p, y] == q
        ]
        stacked = (
            tf.stack(picked, -1) if picked else tf.zeros(weights.shape[:-2] + (0,))
        )
        out.append(semiring.sum(stacked, -1))
    return tf.stack(out, -1)


@pytest.mark.parametrize("vocab,context_size", [(3, 0), (3, 1), (2, 2), (2, 3)])
@pytest.mark.parametrize("semiring", [Real, Log, MaxTropical])
def test_forward_reduce_and_backward_broadcast(vocab, context_size, semiring):
    ctx = FullNGram(vocab, context_size)
    table = ctx.next_state_table().numpy()
    S = table.shape[0]
    weights = tf.constant(
        np.random.default_rng(S).normal(size=(2, S, vocab)), tf.float32
    )
    expected = brute_reduce(table, weights, semiring)
    np.testing.assert_allclose(
        ctx.forward_reduce(weights, semiring), expected, rtol=1e-5
    )
    generic = NextStateTable(table)
    np.testing.assert_allclose(
        generic.forward_reduce(weights, semiring), expected, rtol=1e-5
    )
    beta = tf.constant(np.arange(2 * S).reshape(2, S), tf.float32)
    broadcast = ctx.backward_broadcast(beta).numpy()
    for p, y in itertools.product(range(S), range(vocab)):
        assert (broadcast[:, p, y] == beta.numpy()[:, table[p, y]]).all()


def test_forward_reduce_of_composite_values():
    ctx = FullNGram(2, 1)
    w = tf.constant(np.random.default_rng(1).normal(size=(3, 2)), tf.float32)
    real, maxt = ctx.forward_reduce((tf.exp(w), w), Cartesian(Real, MaxTropical))
    np.testing.assert_allclose(real, ctx.forward_reduce(tf.exp(w), Real), rtol=1e-6)
    np.testing.assert_allclose(maxt, ctx.forward_reduce(w, MaxTropical), rtol=1e-6)


def test_next_state_table():
    # a 2-state DFA over {1, 2}: label 2 toggles, label 1 stays
    ctx = NextStateTable(np.array([[0, 1], [1, 0]]))
    np.testing.assert_array_equal(
        ctx.walk_states(tf.constant([2, 1, 2, 2])), [0, 1, 1, 0, 1]
    )


def test_bad_contexts():
    with pytest.raises(ValueError, match="vocab_size must be an int >= 1, got 0"):
        FullNGram(0, 2)
    with pytest.raises(ValueError, match="context_size must be an int >= 0, got -1"):
        FullNGram(3, -1)
    with pytest.raises(
        ValueError, match=r"entries must be states in \[0, 2\), got \[2, 5\]"
    ):
        NextStateTable(np.array([[0, 2], [5, 1]]))
    with pytest.raises(
        ValueError, match=r"must be \[num_states >= 1, vocab_size >= 1\]"
    ):
        NextStateTable(np.zeros([3], np.int32))
    with pytest.raises(
        ValueError, match=r"labels must be in \[0, vocab_size=3\], got \[4\]"
    ):
        FullNGram(3, 1).walk_states(tf.constant([[1, 4]]))


def test_shift_down():
    np.testing.assert_array_equal(
        shift_down(tf.constant([[1.0, 2.0, 3.0]]), Real), [[0.0, 1.0, 2.0]]
    )
    np.testing.assert_array_equal(
        shift_down(tf.constant([[1.0, 2.0]]), Log), [[-np.inf, 1.0]]
    )


# One context state, one label: every quantity below is a plain number.
A, B, L = 2.0, 3.0, 5.0  # alpha, blank weight, label weight (Real semiring)
ONE_STATE = FullNGram(1, 0)


def frame_forward(alignment):
    n = alignment.num_states()
    alpha = tf.constant([[A]])
    return float(
        alignment.forward(
            alpha, [tf.constant([[B]])] * n, [tf.constant([[[L]]])] * n, ONE_STATE, Real
        )[0, 0]
    )


def test_frame_dependent_forward_by_hand():
    # blank, or one label
    assert frame_forward(FrameDependent()) == A * B + A * L


def test_frame_label_dependent_forward_by_hand():
    # blank | label blank | label label blank
    assert frame_forward(FrameLabelDependent(2)) == A * B + A * L * B + A * L * L * B
    assert frame_forward(FrameLabelDependent(1)) == A * B + A * L * B


def test_string_forward_by_hand():
    # A string of 2 labels: states u = 0, 1, 2; alpha at u = 0 and 1.
    alpha = tf.constant([[2.0, 7.0, 0.0]])
    blank = tf.constant([[3.0, 11.0, 13.0]])
    lexical = tf.constant([[5.0, 17.0, 19.0]])  # lexical[u]: emit label u + 1
    got = FrameDependent().string_forward(alpha, [blank], [lexical], Real)
    np.testing.assert_allclose(got, [[2 * 3, 7 * 11 + 2 * 5, 0 * 13 + 7 * 17]])
    got = FrameLabelDependent(2).string_forward(alpha, [blank] * 3, [lexical] * 3, Real)
    u0 = 2 * 3
    u1 = 7 * 11 + 2 * 5 * 11
    u2 = 7 * 17 * 13 + 2 * 5 * 17 * 13
    np.testing.assert_allclose(got, [[u0, u1, u2]])


def test_check_num_weights():
    with pytest.raises(ValueError, match="has 3 frame-local states: give 3 blank"):
        check_num_weights(FrameLabelDependent(2), [1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="max_expansions must be an int >= 1"):
        FrameLabelDependent(0)
    alignment = FrameLabelDependent(2)
    assert alignment.topological_visit() == [0, 1, 2]
    assert [alignment.lexical_next(a) for a in range(3)] == [1, 2, None]
    assert [alignment.blank_next(a) for a in range(3)] == [0, 0, 0]
