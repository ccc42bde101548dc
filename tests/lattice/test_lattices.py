# SPDX-License-Identifier: Apache-2.0
"""RecognitionLattice against hand arithmetic and brute-force path enumeration."""

import itertools
import json
import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_transducer.lattice import RecognitionLattice
from tf_transducer.lattice.alignments import FrameDependent
from tf_transducer.lattice.alignments import FrameLabelDependent
from tf_transducer.lattice.contexts import FullNGram
from tf_transducer.lattice.contexts import NextStateTable
from tf_transducer.lattice.semirings import Log
from tf_transducer.lattice.semirings import LogLogExpectation
from tf_transducer.lattice.semirings import MaxTropical
from tf_transducer.lattice.semirings import Real
from tf_transducer.lattice.weight_fns import JointWeightFn
from tf_transducer.lattice.weight_fns import LocallyNormalizedWeightFn
from tf_transducer.lattice.weight_fns import NullCacher
from tf_transducer.lattice.weight_fns import SharedRNNCacher
from tf_transducer.lattice.weight_fns import TableWeightFn


def table_lattice(table, context, alignment):
    return RecognitionLattice(context, alignment, NullCacher(), TableWeightFn(table))


def frames_of(inputs):
    """Frames whose first feature is the table's input index: [B, T, 1]."""
    return tf.constant(np.asarray(inputs, np.float32)[..., None])


def test_two_frames_by_hand():
    # Vocabulary {a}, context = the last label (states: 0 = nothing yet, 1 = "a"),
    # one blank or one label per frame. Real weights b[t, c] and l[t, c]:
    b = {(0, 0): 2.0, (1, 0): 3.0, (1, 1): 5.0}
    lab = {(0, 0): 7.0, (1, 0): 11.0, (1, 1): 13.0}
    table = np.zeros((2, 2, 2))  # [input = frame index, context state, blank / a]
    for (t, c), w in b.items():
        table[t, c, 0] = math.log(w)
    for (t, c), w in lab.items():
        table[t, c, 1] = math.log(w)
    lattice = table_lattice(table, FullNGram(1, 1), FrameDependent())
    x = frames_of([[0, 1]])
    # every alignment:  blank blank | blank a | a blank | a a
    z = 2 * 3 + 2 * 11 + 7 * 5 + 7 * 13
    assert float(lattice.forward(x, [2], Real)[0]) == pytest.approx(z)
    assert float(lattice.forward(x, [2], Log)[0]) == pytest.approx(math.log(z))
    assert float(lattice.forward(x, [2], MaxTropical)[0]) == pytest.approx(math.log(91))
    spelled_a = 2 * 11 + 7 * 5  # the paths that spell "a"
    got = lattice.string_forward(x, [2], [[1]], [1], Real)
    assert float(got[0]) == pytest.approx(spelled_a)
    loss = lattice(x, [2], [[1]], [1])
    assert float(loss[0]) == pytest.approx(math.log(z) - math.log(spelled_a), rel=1e-6)
    labels, count, weight = lattice.shortest_path(x, [2])
    assert labels.numpy().tolist() == [[1, 1]] and count.numpy().tolist() == [2]
    assert float(weight[0]) == pytest.approx(math.log(7 * 13))


def enumerate_paths(table, inputs, context, max_expansions):
    """Every path: (log weight, labels, alignment labels), float64."""
    V = table.shape[-1] - 1
    nxt = context.next_state_table().numpy()
    if max_expansions is None:
        per_frame = [(0,)] + [(y,) for y in range(1, V + 1)]
    else:
        per_frame = [
            (*s, 0)
            for j in range(max_expansions + 1)
            for s in itertools.product(range(1, V + 1), repeat=j)
        ]
    paths = []
    for choice in itertools.product(per_frame, repeat=len(inputs)):
        state, weight, labels, aligned = context.start(), 0.0, [], []
        for t, segment in enumerate(choice):
            for y in segment:
                weight += table[inputs[t], state, y]
                aligned.append(y)
                if y:
                    state = nxt[state, y - 1]
                    labels.append(y)
        paths.append((weight, tuple(labels), aligned))
    return paths


ALIGNMENTS = {
    "frame": lambda: FrameDependent(),
    "label1": lambda: FrameLabelDependent(1),
    "label2": lambda: FrameLabelDependent(2),
}


CONTEXTS = {
    "unigram": lambda: FullNGram(2, 0),
    "bigram": lambda: FullNGram(2, 1),
    "trigram": lambda: FullNGram(2, 2),
    # a 3-state DFA: label 1 moves 0 -> 1 -> 2 -> 2, label 2 goes back to 0
    "table": lambda: NextStateTable(np.array([[1, 0], [2, 0], [2, 0]])),
}


@pytest.mark.parametrize("alignment", sorted(ALIGNMENTS))
@pytest.mark.parametrize("context_name", sorted(CONTEXTS))
def test_against_every_path(alignment, context_name):
    V, T = 2, 3
    context = CONTEXTS[context_name]()
    rng = np.random.default_rng(len(context_name))
    table = rng.normal(size=(T, context.shape()[0], 1 + V))
    lattice = table_lattice(table, context, ALIGNMENTS[alignment]())
    k = None if alignment == "frame" else int(alignment[-1])
    paths = enumerate_paths(table, list(range(T)), context, k)
    weights = np.array([p[0] for p in paths])
    x = frames_of([list(range(T))])
    log_z = np.logaddexp.reduce(weights)
    np.testing.assert_allclose(lattice.forward(x, [T]), [log_z], rtol=1e-5)
    np.testing.assert_allclose(
        lattice.forward(x, [T], Real), [np.exp(weights).sum()], rtol=1e-5
    )
    np.testing.assert_allclose(
        lattice.forward(x, [T], MaxTropical), [weights.max()], rtol=1e-5
    )
    for labels in [(), (1,), (2, 1), (1, 1, 2)]:
        spelled = [w for w, y, _ in paths if y == labels]
        expected = np.logaddexp.reduce(spelled) if spelled else -np.inf
        padded = [list(labels) + [0] * (3 - len(labels))]
        got = lattice.string_forward(x, [T], padded, [len(labels)])
        np.testing.assert_allclose(got, [expected], rtol=1e-5)
        if spelled:
            np.testing.assert_allclose(
                lattice(x, [T], padded, [len(labels)]), [log_z - expected], rtol=1e-5
            )
    aligned, count, weight = lattice.shortest_path(x, [T])
    best = paths[int(np.argmax(weights))]
    assert aligned.numpy()[0, : count[0]].tolist() == best[2]
    assert (aligned.numpy()[0, count[0] :] == 0).all()
    np.testing.assert_allclose(weight, [best[0]], rtol=1e-5)


def joint_lattice(alignment=None, local=False, vocab=3, context_size=1, seed=0):
    context = FullNGram(vocab, context_size)
    weight_fn = JointWeightFn(vocab, 8)
    if local:
        weight_fn = LocallyNormalizedWeightFn(weight_fn)
    lattice = RecognitionLattice(
        context,
        alignment or FrameLabelDependent(2),
        lambda c: SharedRNNCacher(vocab, context_size, 6, 5),
        weight_fn,
    )
    rng = np.random.default_rng(seed)
    frames = tf.constant(rng.normal(size=(3, 5, 4)), tf.float32)
    labels = tf.constant([[1, 3, 2, 2], [2, 0, 0, 0], [3, 1, 0, 0]])
    return lattice, frames, [5, 3, 4], labels, [4, 1, 2]


@pytest.mark.parametrize("local", [False, True])
def test_padding_changes_nothing(local):
    lattice, frames, num_frames, labels, num_labels = joint_lattice(local=local)
    batched = lattice(frames, num_frames, labels, num_labels).numpy()
    paths = lattice.shortest_path(frames, num_frames)
    for b in range(3):
        T, U = num_frames[b], num_labels[b]
        one = lattice(frames[b : b + 1, :T], [T], labels[b : b + 1, :U], [U])
        assert float(one[0]) == pytest.approx(batched[b], rel=1e-5)
        # and garbage in the padding changes nothing either
        noisy = tf.concat([frames[b : b + 1, :T], 100 + frames[b : b + 1, T:]], 1)
        junk = tf.concat([labels[b : b + 1, :U], 3 - labels[b : b + 1, U:] * 0], 1)
        again = lattice(noisy, [T], junk, [U])
        assert float(again[0]) == pytest.approx(batched[b], rel=1e-5)
        single = lattice.shortest_path(frames[b : b + 1, :T], [T])
        n = int(single[1][0])
        assert int(paths[1][b]) == n
        assert paths[0].numpy()[b, :n].tolist() == single[0].numpy()[0, :n].tolist()
        assert float(paths[2][b]) == pytest.approx(float(single[2][0]), rel=1e-5)


def test_expectation_semiring_gives_the_path_entropy():
    V, T = 2, 3
    context = FullNGram(V, 1)
    rng = np.random.default_rng(5)
    table = rng.normal(size=(T, context.shape()[0], 1 + V))
    # locally normalised table: every state's arcs sum to probability 1
    table = table - np.log(np.exp(table).sum(-1, keepdims=True))
    lattice = table_lattice(table, context, FrameDependent())
    p = np.exp([w for w, _, _ in enumerate_paths(table, [0, 1, 2], context, None)])
    assert p.sum() == pytest.approx(1.0)
    entropy = -(p * np.log(p)).sum()

    def lift(w):  # weight w = log p, carrying the value -log p (stored as its log)
        return LogLogExpectation.weighted(w, tf.math.log(-w))

    total, weighted = lattice.forward(
        frames_of([[0, 1, 2]]), [T], LogLogExpectation, lift=lift
    )
    assert float(total[0]) == pytest.approx(0.0, abs=1e-5)
    assert float(tf.exp(weighted[0])) == pytest.approx(entropy, rel=1e-5)


def test_no_frames_is_the_semiring_one():
    lattice, frames, _, labels, _ = joint_lattice()
    for semiring, one in ((Log, 0.0), (Real, 1.0), (MaxTropical, 0.0)):
        np.testing.assert_allclose(
            lattice.forward(frames, [0, 0, 0], semiring), [one] * 3
        )
    empty = lattice.string_forward(frames, [0, 0, 0], labels, [0, 0, 0])
    np.testing.assert_allclose(empty, [0.0] * 3)
    np.testing.assert_allclose(lattice(frames, [0, 0, 0], labels, [0, 0, 0]), [0.0] * 3)
    aligned, count, weight = lattice.shortest_path(frames, [0, 0, 0])
    assert count.numpy().tolist() == [0, 0, 0] and (weight.numpy() == 0).all()
    none = frames[:, :0]  # no frames at all, T = 0
    np.testing.assert_allclose(lattice.forward(none, [0, 0, 0]), [0.0] * 3)
    np.testing.assert_allclose(lattice(none, [0, 0, 0], labels, [0, 0, 0]), [0.0] * 3)
    assert lattice.shortest_path(none, [0, 0, 0])[1].numpy().tolist() == [0, 0, 0]
    log_z, blank_m, lexical_m = lattice.backward(none, [0, 0, 0])
    np.testing.assert_array_equal(log_z, [0.0] * 3)
    assert blank_m.shape[1] == lexical_m.shape[1] == 0


# frames, num_frames, labels and num_labels with every dimension unknown
UNKNOWN_DIMS = [
    tf.TensorSpec([None] * rank, dtype)
    for rank, dtype in ((3, tf.float32), (1, tf.int32), (2, tf.int32), (1, tf.int32))
]


@pytest.mark.parametrize("frame_by_frame", [True, False])
def test_no_frames_traced_with_unknown_dimensions(frame_by_frame):
    lattice, frames, _, labels, _ = joint_lattice()
    lattice.frame_by_frame = frame_by_frame
    lattice.build(frames.shape)

    @tf.function(input_signature=UNKNOWN_DIMS)
    def everything(frames, num_frames, labels, num_labels):
        with tf.GradientTape() as tape:
            tape.watch(frames)
            loss = lattice(frames, num_frames, labels, num_labels)
            total = tf.reduce_sum(loss)
        grads = tape.gradient(total, [frames, *lattice.trainable_variables])
        paths = lattice.shortest_path(frames, num_frames)
        return loss, grads, lattice.backward(frames, num_frames), paths

    zeros = tf.zeros([3], tf.int32)
    for T, U in ((0, 0), (0, 2), (5, 0)):  # no frames at all; none valid
        out = everything(frames[:, :T], zeros, labels[:, :U], zeros)
        loss, grads, (log_z, blank_m, lexical_m), (aligned, count, weight) = out
        np.testing.assert_array_equal(loss, [0.0] * 3)
        np.testing.assert_array_equal(log_z, [0.0] * 3)
        assert grads[0].shape == (3, T, 4)
        assert all(not tf.convert_to_tensor(g).numpy().any() for g in grads)
        assert blank_m.shape[1] == lexical_m.shape[1] == T
        assert aligned.shape == (3, T * 3)
        assert count.numpy().tolist() == [0] * 3 and not weight.numpy().any()


@pytest.mark.parametrize("alignment", sorted(ALIGNMENTS))
def test_backward_marginals_are_forward_gradients(alignment):
    lattice, frames, num_frames, _, _ = joint_lattice(ALIGNMENTS[alignment]())
    cache = lattice.build_cache()
    blank, lexical = lattice.weight_fn(cache, frames)
    with tf.GradientTape() as tape:
        tape.watch([blank, lexical])
        alpha = lattice._forward_alpha(blank, lexical, tf.constant(num_frames), Log)
        log_z = Log.sum(alpha, -1)
    grad_blank, grad_lexical = tape.gradient(log_z, [blank, lexical])
    got_z, blank_m, lexical_m = lattice.backward(frames, num_frames, cache=cache)
    np.testing.assert_allclose(got_z, log_z, rtol=1e-5)
    np.testing.assert_allclose(tf.reduce_sum(blank_m, 2), grad_blank, atol=1e-5)
    np.testing.assert_allclose(tf.reduce_sum(lexical_m, 2), grad_lexical, atol=1e-5)
    # every path leaves each valid frame by exactly one arc: a blank, or (one
    # label per frame) a label
    per_frame = tf.reduce_sum(blank_m, [2, 3])
    if alignment == "frame":
        per_frame += tf.reduce_sum(lexical_m, [2, 3, 4])
    per_frame = per_frame.numpy()
    for b, n in enumerate(num_frames):
        np.testing.assert_allclose(per_frame[b, :n], 1.0, rtol=1e-5)
        np.testing.assert_allclose(per_frame[b, n:], 0.0)


def test_global_loss_gradient_equals_autodiff():
    lattice, frames, num_frames, labels, num_labels = joint_lattice(FrameDependent())
    lattice(frames, num_frames, labels, num_labels)
    variables = lattice.trainable_variables
    with tf.GradientTape(persistent=True) as tape:
        loss = tf.reduce_sum(lattice(frames, num_frames, labels, num_labels))
        reference = tf.reduce_sum(
            lattice.forward(frames, num_frames)
            - lattice.string_forward(frames, num_frames, labels, num_labels)
        )
    np.testing.assert_allclose(loss, reference, rtol=1e-6)
    for got, want in zip(
        tape.gradient(loss, variables), tape.gradient(reference, variables), strict=True
    ):
        got, want = tf.convert_to_tensor(got), tf.convert_to_tensor(want)
        np.testing.assert_allclose(got, want, atol=2e-5, rtol=1e-4)


def test_local_normalization_needs_no_denominator():
    lattice, frames, num_frames, labels, num_labels = joint_lattice(
        FrameDependent(), local=True
    )
    # locally normalised, one arc per frame: all paths sum to probability 1
    np.testing.assert_allclose(
        lattice.forward(frames, num_frames), [0.0] * 3, atol=1e-5
    )
    loss = lattice(frames, num_frames, labels, num_labels)
    numerator = lattice.string_forward(frames, num_frames, labels, num_labels)
    np.testing.assert_allclose(loss, -numerator, rtol=1e-6)
    assert lattice.locally_normalized


def test_bad_inputs():
    lattice, frames, num_frames, labels, num_labels = joint_lattice()
    with pytest.raises(
        ValueError, match=r"batch sizes differ: \{'frames': 3, 'num_frames': 2"
    ):
        lattice(frames, [5, 3], labels, num_labels)
    with pytest.raises(
        ValueError, match=r"labels must be in \[1, vocab_size=3\].*\[4\]"
    ):
        lattice(frames, num_frames, tf.constant([[1, 4], [1, 0], [1, 0]]), [2, 1, 1])
    with pytest.raises(
        ValueError, match=r"labels must be in \[1, vocab_size=3\].*\[0\]"
    ):
        lattice(frames, num_frames, tf.constant([[1, 0], [1, 0], [1, 0]]), [2, 1, 1])
    with pytest.raises(ValueError, match="frames must be .B, T, F., got shape"):
        lattice.forward(frames[0], num_frames)
    with pytest.raises(ValueError, match="weight_fn_factory must be a WeightFn"):
        RecognitionLattice(FullNGram(2, 1), FrameDependent(), NullCacher(), "table")
    with pytest.raises(ValueError, match="context must be a ContextDependency"):
        RecognitionLattice(
            None, FrameDependent(), NullCacher(), TableWeightFn(np.zeros((1, 1, 2)))
        )
    wrong = table_lattice(np.zeros((2, 3, 4)), FullNGram(2, 1), FrameDependent())
    with pytest.raises(
        ValueError, match=r"TableWeightFn gives blank weights \[..., 3\]"
    ):
        wrong.forward(frames_of([[0, 1]]), [2])
    with pytest.raises(ValueError, match=r"needs \[..., 4\] and \[..., 4, 3\]"):
        table_lattice(np.zeros((2, 3, 3)), FullNGram(3, 1), FrameDependent()).forward(
            frames_of([[0, 1]]), [2]
        )
    with pytest.raises(ValueError, match="frames must be a float tensor, got int32"):
        lattice(tf.cast(frames, tf.int32), num_frames, labels, num_labels)
    with pytest.raises(ValueError, match="labels must be integers, got float32"):
        lattice(frames, num_frames, tf.cast(labels, tf.float32), num_labels)
    with pytest.raises(ValueError, match="give lift="):
        from tf_transducer.lattice.semirings import LogLogExpectation

        lattice.forward(frames, num_frames, LogLogExpectation)


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_runs_inside_tf_function(jit_compile):
    lattice, frames, num_frames, labels, num_labels = joint_lattice()
    eager = lattice(frames, num_frames, labels, num_labels)
    variables = lattice.trainable_variables

    @tf.function(jit_compile=jit_compile)
    def step(frames, num_frames, labels, num_labels):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(lattice(frames, num_frames, labels, num_labels))
        grads = [tf.convert_to_tensor(g) for g in tape.gradient(loss, variables)]
        return loss, grads, lattice.shortest_path(frames, num_frames)

    loss, grads, (aligned, count, weight) = step(
        frames, tf.constant(num_frames), labels, tf.constant(num_labels)
    )
    assert float(loss) == pytest.approx(float(tf.reduce_sum(eager)), rel=1e-5)
    assert all(bool(tf.reduce_all(tf.math.is_finite(g))) for g in grads)
    want = lattice.shortest_path(frames, num_frames)
    np.testing.assert_array_equal(aligned, want[0])
    np.testing.assert_array_equal(count, want[1])
    np.testing.assert_allclose(weight, want[2], rtol=1e-5)


@pytest.mark.parametrize("alignment", ["frame", "label2"])
@pytest.mark.parametrize("in_function", [False, True], ids=["eager", "graph"])
def test_frame_by_frame_denominator_equals_all_frames(alignment, in_function):
    lattice, frames, num_frames, labels, num_labels = joint_lattice(
        ALIGNMENTS[alignment]()
    )
    lean = RecognitionLattice(
        lattice.context,
        lattice.alignment,
        lattice.weight_fn_cacher,
        lattice.weight_fn,
        frame_by_frame=True,
    )
    frames = tf.Variable(frames)

    def loss_and_grads(which):
        with tf.GradientTape() as tape:
            loss = which(frames, num_frames, labels, num_labels)
            total = tf.reduce_sum(loss)
        targets = [frames, *lattice.trainable_variables]
        return loss, [tf.convert_to_tensor(g) for g in tape.gradient(total, targets)]

    if in_function:
        loss_and_grads = tf.function(loss_and_grads)
    want_loss, want = loss_and_grads(lattice)
    got_loss, got = loss_and_grads(lean)
    np.testing.assert_allclose(got_loss, want_loss, rtol=1e-5)
    assert len(got) == len(want) > 5  # the frames, the cacher's and the joint's
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, atol=2e-5, rtol=1e-4)
    empty = lean(frames, [0, 0, 0], labels, [0, 0, 0])
    np.testing.assert_allclose(empty, [0.0] * 3)


def last_per_batch_case():
    """LAST's RecognitionLatticeCorrectnessTest: a per-batch table [B, N, C, 1 + V].

    table[b, i, c, k] = sign[b, i] * (1 + 9 (2 b + i) + 3 c + k): frame i of
    utterance b reads row i of its own table. Context: the last label (C = 3,
    state y after label y), vocabulary {1, 2}.
    """
    B, N, C, V = 3, 2, 3, 2  # N inputs (table rows) per utterance
    table = 1 + np.arange(B * N * C * (1 + V), dtype=np.float32)
    table = table.reshape(B, N, C, 1 + V)
    table *= np.array([[-1, 1], [1, -1], [1, 1]], np.float32)[:, :, None, None]
    frames = np.broadcast_to(np.arange(N, dtype=np.float32)[None, :, None], (B, N, 1))
    labels = np.array([[1, 2, 0], [2, 1, 0], [1, 2, 0]])
    return table, tf.constant(frames), [2, 1, 0], labels, [1, 1, 0]


lse = np.logaddexp.reduce


def log_sigmoid(x):
    return -np.logaddexp(0.0, -x)


@pytest.mark.parametrize("frame_by_frame", [True, False])
def test_per_batch_table_gives_last_values(frame_by_frame):
    table, frames, num_frames, labels, num_labels = last_per_batch_case()
    lattice = RecognitionLattice(
        FullNGram(2, 1),
        FrameDependent(),
        lambda _: NullCacher(),
        lambda _: TableWeightFn(table),
        frame_by_frame=frame_by_frame,
    )
    # rows read: utterance 0 frame 0 [-1, -2, -3] (state 0); frame 1 [10, 11, 12],
    # [13, 14, 15], [16, 17, 18] (states 0, 1, 2); utterance 1 frame 0 [19, 20, 21]
    log_z = [
        lse([-1 + 10, -1 + 11, -1 + 12, -2 + 13, -2 + 14, -2 + 15,
             -3 + 16, -3 + 17, -3 + 18]),
        lse([19, 20, 21]),
        0.0,
    ]  # fmt: skip
    spelled = [lse([-1 + 11, -2 + 13]), 21.0, 0.0]  # "1", "2", ""
    loss = lattice(frames, num_frames, labels, num_labels)
    np.testing.assert_allclose(loss, np.subtract(log_z, spelled), rtol=1e-6)
    np.testing.assert_allclose(
        lattice.forward(frames, num_frames, MaxTropical), [-3 + 18, 21, 0]
    )
    aligned, count, weight = lattice.shortest_path(frames, num_frames)
    assert aligned.numpy().tolist() == [[2, 2], [2, 0], [0, 0]]
    assert count.numpy().tolist() == [2, 1, 0]
    np.testing.assert_allclose(weight, [-3 + 18, 21, 0])


def local_per_batch_expected(normalize):
    """-log P of last_per_batch_case's labels, locally normalised, by hand."""
    if normalize == "log_softmax":  # one log-softmax over [blank, 1, 2]
        blank_then_1 = (-1 - lse([-1, -2, -3])) + (11 - lse([10, 11, 12]))
        one_then_blank = (-2 - lse([-1, -2, -3])) + (13 - lse([13, 14, 15]))
        two = 21 - lse([19, 20, 21])
    else:  # hat: P(blank) = sigmoid(blank); the labels share the rest by softmax
        blank_then_1 = log_sigmoid(-1) + (log_sigmoid(-10) + 11 - lse([11, 12]))
        one_then_blank = (log_sigmoid(1) + -2 - lse([-2, -3])) + log_sigmoid(13)
        two = log_sigmoid(-19) + 21 - lse([20, 21])
    return [-np.logaddexp(blank_then_1, one_then_blank), -two, 0.0]


@pytest.mark.parametrize("normalize", ["hat", "log_softmax"])
def test_locally_normalized_per_batch_table(normalize):
    table, frames, num_frames, labels, num_labels = last_per_batch_case()
    lattice = RecognitionLattice(
        FullNGram(2, 1),
        FrameDependent(),
        NullCacher(),
        weight_fn_factory=lambda c: LocallyNormalizedWeightFn(
            TableWeightFn(table), normalize
        ),
    )
    want = local_per_batch_expected(normalize)
    np.testing.assert_allclose(
        lattice(frames, num_frames, labels, num_labels), want, rtol=1e-6
    )
    assert lattice.built and lattice.locally_normalized
    # every path of a locally normalised frame-dependent lattice: probability 1
    np.testing.assert_allclose(
        lattice.forward(frames, num_frames), [0.0] * 3, atol=1e-6
    )
    traced = tf.function(lattice, input_signature=UNKNOWN_DIMS)
    got = traced(frames, tf.constant(num_frames), labels, tf.constant(num_labels))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # saved and revived (a fresh lattice, built by its first call)
    config = json.loads(json.dumps(keras.saving.serialize_keras_object(lattice)))
    revived = keras.saving.deserialize_keras_object(config)
    assert type(revived.weight_fn.weight_fn) is TableWeightFn
    np.testing.assert_allclose(
        revived(frames, num_frames, labels, num_labels), want, rtol=1e-6
    )
    revived.build(frames.shape)  # and one built first from the frames' shape
    np.testing.assert_allclose(
        revived(frames, num_frames, labels, num_labels), want, rtol=1e-6
    )


@pytest.mark.parametrize("local", [False, True])
@pytest.mark.parametrize("frame_by_frame", [True, False])
def test_nan_in_the_padding_changes_nothing(local, frame_by_frame):
    lattice, frames, num_frames, labels, num_labels = joint_lattice(local=local)
    lattice.frame_by_frame = frame_by_frame
    junk = frames.numpy()
    junk[1, 3:] = np.nan  # num_frames[1] = 3
    junk[2, 4, 1] = np.inf  # num_frames[2] = 4

    def loss_and_grads(frames):
        frames = tf.Variable(frames)
        with tf.GradientTape() as tape:
            loss = lattice(frames, num_frames, labels, num_labels)
            total = tf.reduce_sum(loss)
        targets = [frames, *lattice.trainable_variables]
        return loss, [tf.convert_to_tensor(g) for g in tape.gradient(total, targets)]

    want_loss, want = loss_and_grads(frames)
    got_loss, got = loss_and_grads(junk)
    np.testing.assert_allclose(got_loss, want_loss, rtol=1e-6)
    assert len(got) == len(want) > 1
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(got[0][1, 3:], 0.0)


@pytest.mark.parametrize("mode", ["eager", "graph"])
def test_bad_values_name_the_argument(mode):
    lattice, frames, num_frames, labels, num_labels = joint_lattice()
    lattice.build(frames.shape)  # traced below with F unknown too
    cache = lattice.build_cache()

    def run(method, *args, **kwargs):
        if mode == "eager":
            return method(*args, **kwargs)
        specs = [tf.TensorSpec([None] * np.ndim(a), tf.as_dtype(np.asarray(a).dtype))
                 for a in args]  # fmt: skip
        return tf.function(lambda *a: method(*a, **kwargs), input_signature=specs)(
            *[np.asarray(a) for a in args]
        )

    frames = frames.numpy()
    labels, num_frames, num_labels = (np.asarray(x, np.int32) for x in
                                      (labels, num_frames, num_labels))  # fmt: skip
    for bad in (np.nan, np.inf, -np.inf):
        nan = frames.copy()
        nan[1, 2, 3] = bad  # before num_frames[1] = 3
        with pytest.raises(
            tf.errors.InvalidArgumentError,
            match=r"frames must be finite \(no NaN or inf\) before num_frames",
        ):
            run(lattice, nan, num_frames, labels, num_labels)
        with pytest.raises(tf.errors.InvalidArgumentError, match="frames must be"):
            run(lattice.shortest_path, nan, num_frames)
    poisoned = cache.numpy()
    poisoned[2, 0] = np.nan
    with pytest.raises(tf.errors.InvalidArgumentError, match="cache must be finite"):
        run(lattice, frames, num_frames, labels, num_labels, cache=poisoned)
    with pytest.raises(tf.errors.InvalidArgumentError, match="cache must be finite"):
        run(lattice.forward, frames, num_frames, cache=poisoned)
    zero = labels.copy()
    zero[0, 1] = 0  # before num_labels[0] = 4
    error = ValueError if mode == "eager" else tf.errors.InvalidArgumentError
    with pytest.raises(error, match=r"labels must be in \[1, vocab_size=3\]"):
        run(lattice, frames, num_frames, zero, num_labels)
    if mode == "graph":  # batch sizes known only when run
        with pytest.raises(
            tf.errors.InvalidArgumentError, match="labels must have one row per row"
        ):
            run(lattice, frames[:2], num_frames[:2], labels, num_labels)
        with pytest.raises(
            tf.errors.InvalidArgumentError, match="num_frames must have one entry"
        ):
            run(lattice, frames, num_frames[:2], labels, num_labels)
    table = table_lattice(np.zeros((2, 3, 3)), FullNGram(2, 1), FrameDependent())
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"frame\[..., 0\] must index the table"
    ):
        run(table.forward, np.array([[[0.0], [2.0]]], np.float32), np.array([2]))
