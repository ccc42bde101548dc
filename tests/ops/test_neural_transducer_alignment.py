# SPDX-License-Identifier: Apache-2.0
"""The Neural Transducer's block alignment DP against brute-force enumeration."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from tf_transducer.ops.neural_transducer import aligned_log_probs
from tf_transducer.ops.neural_transducer import aligned_targets
from tf_transducer.ops.neural_transducer import best_block_alignment

E = 0  # the <e> symbol in these tests


def alignment_score(lp, labels, counts):
    """log P of one alignment: per block, its labels then <e>."""
    total, s = 0.0, 0
    for b, n in enumerate(counts):
        for k in range(n):
            total += lp[b, s + k, k, labels[s + k]]
        total += lp[b, s + n, n, E]
        s += n
    return total


def brute_force(lp, labels, blocks, width):
    U = len(labels)
    best, best_counts = -np.inf, None
    # (random scores: no ties)
    for counts in itertools.product(range(width), repeat=blocks):
        if sum(counts) != U:
            continue
        score = alignment_score(lp, labels, counts)
        if score > best:
            best, best_counts = score, counts
    return best, best_counts


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("width", [1, 2, 3, 4])
def test_dp_equals_brute_force(seed, width):
    rng = np.random.default_rng(seed * 10 + width)
    B, NB, U, V = 4, 5, 6, 5
    logits = rng.normal(size=(B, NB, U + 1, width, V)) * 2
    lp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    labels = rng.integers(1, V, size=(B, U))
    label_lengths = np.array([6, 3, 0, 5])
    num_blocks = np.array([5, 2, 3, 4])
    counts, score = best_block_alignment(
        tf.constant(lp, tf.float32), labels, label_lengths, num_blocks, width, E
    )
    for b in range(B):
        L, n = label_lengths[b], num_blocks[b]
        want, want_counts = brute_force(lp[b], labels[b, :L], n, width)
        if want_counts is None:  # does not fit: (W - 1) x blocks < U
            assert L > (width - 1) * n
            assert score[b] == -np.inf and (counts.numpy()[b] == 0).all()
            continue
        assert float(score[b]) == pytest.approx(want, rel=1e-5)
        assert counts.numpy()[b, :n].tolist() == list(want_counts)
        assert (counts.numpy()[b, n:] == 0).all()


def test_aligned_targets_and_their_log_probs():
    rng = np.random.default_rng(0)
    lp = np.log(rng.dirichlet(np.ones(4), size=(1, 3, 4, 3)))  # [B, NB, U+1, W, V]
    labels = np.array([[3, 1, 2]])
    counts = np.array([[2, 0, 1]])
    targets, positions, mask = aligned_targets(counts, labels, [3], 3, E)
    assert targets.numpy()[0].tolist() == [[3, 1, E], [E, 0, 0], [2, E, 0]]
    assert mask.numpy()[0].tolist() == [
        [True, True, True], [True, False, False], [True, True, False]
    ]  # fmt: skip
    assert positions.numpy()[0, :, 0].tolist() == [0, 2, 2]
    picked = aligned_log_probs(tf.constant(lp), positions, targets).numpy()
    total = picked[mask.numpy()].sum()
    assert total == pytest.approx(alignment_score(lp[0], labels[0], counts[0]))


def test_bad_arguments():
    with pytest.raises(ValueError, match="max_width must be an int >= 1, got 0"):
        best_block_alignment(tf.zeros([1, 1, 1, 1, 2]), [[0]], [0], [1], 0, E)
    with pytest.raises(
        ValueError, match=r"log_probs must be \[B, NB, U \+ 1, W=2, V\]"
    ):
        best_block_alignment(tf.zeros([1, 1, 2, 3, 4]), [[0]], [0], [1], 2, E)


@pytest.mark.parametrize("num_labels", [0, 1, 2, 3])
def test_dp_equals_brute_force_for_every_block_width(num_labels):
    # Widths far above the targets (W up to U + 4) and U = 0 included.
    rng = np.random.default_rng(num_labels)
    B, NB, V = 3, 3, 4
    for width in range(1, num_labels + 5):
        logits = rng.normal(size=(B, NB, num_labels + 1, width, V)) * 2
        lp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        labels = rng.integers(1, V, size=(B, num_labels))
        label_lengths = np.array([num_labels, max(num_labels - 1, 0), 0])
        num_blocks = np.array([NB, 2, 1])
        counts, score = best_block_alignment(
            tf.constant(lp), labels, label_lengths, num_blocks, width, E
        )
        for b in range(B):
            L, n = label_lengths[b], num_blocks[b]
            want, want_counts = brute_force(lp[b], labels[b, :L], n, width)
            if want_counts is None:
                assert score[b] == -np.inf
                continue
            assert float(score[b]) == pytest.approx(want, rel=1e-9)
            assert counts.numpy()[b, :n].tolist() == list(want_counts)


@pytest.mark.parametrize(
    "labels,lengths,blocks,message",
    [
        ([[1, 7]], [2], [2], r"labels must lie in \[0, V = 4\).*got 7 at \[b, u\] = "
         r"\[0, 1\]"),
        ([[1, 2]], [3], [2], r"label_lengths must lie in \[0, 2\]; got 3"),
        ([[1, 2]], [2], [5], r"num_blocks must lie in \[0, 2\]; got 5"),
        ([[1, 2], [1, 1]], [2, 2], [2, 2], "labels has 2 rows for log_probs' batch"),
    ],
)  # fmt: skip
def test_bad_values_name_the_argument(labels, lengths, blocks, message):
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        best_block_alignment(tf.zeros([1, 2, 3, 2, 4]), labels, lengths, blocks, 2, E)
    with pytest.raises(ValueError, match=r"e_symbol must lie in \[0, V = 4\), got 4"):
        best_block_alignment(tf.zeros([1, 2, 3, 2, 4]), [[1, 2]], [2], [2], 2, 4)


@pytest.mark.parametrize("seed", range(4))
def test_edit_distance_equals_tf_edit_distance_also_under_xla(seed):
    from tf_transducer.ops.neural_transducer import edit_distance
    from tf_transducer.ops.neural_transducer import left_aligned

    rng = np.random.default_rng(seed)
    B, L1, L2 = 5, int(rng.integers(0, 7)), int(rng.integers(0, 7))
    hyp, ref = rng.integers(0, 3, (B, L1)), rng.integers(0, 3, (B, L2))
    hyp_len, ref_len = rng.integers(0, L1 + 1, B), rng.integers(0, L2 + 1, B)

    def sparse(x, n):
        rows = [list(x[b, : n[b]]) for b in range(B)]
        return tf.ragged.constant(rows, tf.int64, ragged_rank=1).to_sparse()

    want = tf.edit_distance(sparse(hyp, hyp_len), sparse(ref, ref_len), False)
    got = edit_distance(hyp, hyp_len, ref, ref_len)
    np.testing.assert_array_equal(got, want)
    compiled = tf.function(edit_distance, jit_compile=True)
    np.testing.assert_array_equal(compiled(hyp, hyp_len, ref, ref_len), want)
    values, count = left_aligned(np.array([[5, 6, 7, 8]]), [[False, True, False, True]])
    assert values.numpy().tolist() == [[6, 8, 0, 0]] and count.numpy().tolist() == [2]
