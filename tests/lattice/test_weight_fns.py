# SPDX-License-Identifier: Apache-2.0
"""Weight functions and cachers: shapes, normalisation, state selection, configs."""

import numpy as np
import pytest
import tensorflow as tf

from tf_transducer.lattice.contexts import FullNGram
from tf_transducer.lattice.weight_fns import JointWeightFn
from tf_transducer.lattice.weight_fns import LocallyNormalizedWeightFn
from tf_transducer.lattice.weight_fns import NullCacher
from tf_transducer.lattice.weight_fns import SharedEmbCacher
from tf_transducer.lattice.weight_fns import SharedRNNCacher
from tf_transducer.lattice.weight_fns import TableWeightFn
from tf_transducer.lattice.weight_fns import hat_normalize
from tf_transducer.lattice.weight_fns import log_softmax_normalize
from tf_transducer.lattice.weight_fns import ngram_context_labels


@pytest.mark.parametrize("normalize", [hat_normalize, log_softmax_normalize])
def test_normalized_weights_sum_to_one(normalize):
    rng = np.random.default_rng(0)
    blank, lexical = normalize(
        rng.normal(size=(4, 3)) * 3, rng.normal(size=(4, 3, 5)) * 3
    )
    total = np.exp(blank) + np.exp(lexical).sum(-1)
    np.testing.assert_allclose(total, 1.0, rtol=1e-6)


def test_hat_blank_is_a_sigmoid():
    blank, lexical = hat_normalize(tf.constant([0.0]), tf.constant([[1.0, 1.0]]))
    np.testing.assert_allclose(np.exp(blank), [0.5])
    np.testing.assert_allclose(np.exp(lexical), [[0.25, 0.25]], rtol=1e-6)


def test_ngram_context_labels():
    np.testing.assert_array_equal(
        ngram_context_labels(2, 2),
        [[0, 0], [0, 1], [0, 2], [1, 1], [1, 2], [2, 1], [2, 2]],
    )
    np.testing.assert_array_equal(ngram_context_labels(3, 0), [[0]])


def test_shared_rnn_cacher_embeds_every_state():
    context = FullNGram(4, 2)
    cache = SharedRNNCacher(4, 2, rnn_size=7, rnn_embedding_size=3)(None)
    assert cache.shape == (context.shape()[0], 7)
    assert SharedEmbCacher(context.shape()[0], 5)(None).shape == (21, 5)
    assert NullCacher()(None) is None


@pytest.mark.parametrize("local", [False, True])
def test_joint_weight_fn_selects_states(local):
    cacher = SharedEmbCacher(13, 6)
    weight_fn = JointWeightFn(vocab_size=3, hidden_size=8)
    if local:
        weight_fn = LocallyNormalizedWeightFn(weight_fn, "log_softmax")
    cache = cacher(None)
    frames = tf.constant(np.random.default_rng(1).normal(size=(2, 5, 4)), tf.float32)
    blank, lexical = weight_fn(cache, frames)
    assert blank.shape == (2, 5, 13) and lexical.shape == (2, 5, 13, 3)
    state = tf.constant([[[0, 12, 4]] * 5, [[7, 7, 1]] * 5])
    some_blank, some_lexical = weight_fn(cache, frames, state)
    np.testing.assert_allclose(
        some_blank, tf.gather(blank, state, batch_dims=2), rtol=1e-6
    )
    np.testing.assert_allclose(
        some_lexical, tf.gather(lexical, state, batch_dims=2), rtol=1e-6
    )


def test_table_weight_fn():
    table = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)  # [I, C, 1 + V]
    blank, lexical = TableWeightFn(table)(None, tf.constant([[1.0, 9.0], [0.0, 9.0]]))
    np.testing.assert_array_equal(blank, [table[1, :, 0], table[0, :, 0]])
    np.testing.assert_array_equal(lexical, [table[1, :, 1:], table[0, :, 1:]])
    per_batch = np.stack([table, table + 100])  # [B, I, C, 1 + V]
    blank, _ = TableWeightFn(per_batch)(None, tf.constant([[1.0], [1.0]]))
    np.testing.assert_array_equal(blank, [table[1, :, 0], table[1, :, 0] + 100])
    with pytest.raises(ValueError, match="table must be .input_vocab"):
        TableWeightFn(np.zeros([3, 1]))
    with pytest.raises(ValueError, match=r"frame must have batch 2 as the per-batch"):
        TableWeightFn(per_batch)(None, tf.constant([[1.0], [1.0], [0.0]]))
    for bad in (2.0, -1.0, np.nan):
        with pytest.raises(
            tf.errors.InvalidArgumentError,
            match=rf"frame\[..., 0\] must index the table's 2 inputs, \[0, 2\); "
            rf"got {bad} at index \[1\]",
        ):
            TableWeightFn(table)(None, tf.constant([[1.0, 9.0], [bad, 9.0]]))


def test_bad_arguments():
    # (configs round trip in tests/test_public_api.py)
    with pytest.raises(ValueError, match="normalize must be one of"):
        LocallyNormalizedWeightFn(JointWeightFn(3, 8), "softmax")
    with pytest.raises(ValueError, match="hidden_size must be an int >= 1, got 0"):
        JointWeightFn(3, 0)
    with pytest.raises(ValueError, match="context_size must be an int >= 0"):
        SharedRNNCacher(3, -1, 4, 2)
