# SPDX-License-Identifier: Apache-2.0
"""Transducer parts: streaming steps equal the offline calls; configs."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_transducer.layers import PredictionNetwork
from tf_transducer.layers import TransducerEncoder
from tf_transducer.layers import TransducerJoiner


def test_encoder_chunks_equal_the_offline_encoder():
    keras.utils.set_random_seed(0)
    encoder = TransducerEncoder(units=16, num_layers=2, stack=3)
    x = np.random.default_rng(0).normal(size=(2, 24, 5)).astype(np.float32)
    want, lengths = encoder(x, np.array([24, 24]))
    assert want.shape == (2, 8, 16) and list(lengths.numpy()) == [8, 8]
    states = encoder.initial_state(2)
    got = []
    for start in range(0, 24, 6):
        out, states = encoder.step(tf.constant(x[:, start : start + 6]), states)
        got.append(out)
    np.testing.assert_allclose(np.concatenate(got, axis=1), want, atol=1e-5)
    with pytest.raises(ValueError, match="static multiple of stack=3"):
        encoder.step(tf.constant(x[:, :4]), encoder.initial_state(2))


@pytest.mark.parametrize("kind", ["lstm", "stateless"])
def test_prediction_steps_equal_the_offline_network(kind):
    keras.utils.set_random_seed(1)
    net = PredictionNetwork(9, embedding_dim=6, units=10, kind=kind, context_size=3)
    labels = np.array([[0, 3, 5, 5, 1], [0, 8, 2, 7, 7]], np.int32)
    want = net(labels).numpy()
    state = net.initial_state(2)
    for u in range(labels.shape[1]):
        out, state = net.step(labels[:, u], state)
        np.testing.assert_allclose(out, want[:, u], atol=1e-5)


def test_joiner_full_and_pruned_logits_agree():
    keras.utils.set_random_seed(2)
    joiner = TransducerJoiner(7, units=12)
    enc = np.random.default_rng(1).normal(size=(2, 4, 5)).astype(np.float32)
    dec = np.random.default_rng(2).normal(size=(2, 3, 6)).astype(np.float32)
    full = joiner(enc, dec).numpy()
    assert full.shape == (2, 4, 3, 7)
    e = joiner.project_encoder(enc)[:, :, None]
    d = tf.gather(joiner.project_decoder(dec), [[[1, 2]] * 4] * 2, axis=1, batch_dims=1)
    np.testing.assert_allclose(joiner.joint(e, d), full[:, :, 1:3], atol=1e-5)


def test_bad_arguments():
    with pytest.raises(ValueError, match="stack must be a positive number"):
        TransducerEncoder(stack=0)
    with pytest.raises(ValueError, match='kind must be "lstm" or "stateless"'):
        PredictionNetwork(5, kind="gru")
    with pytest.raises(ValueError, match="vocab_size must be a positive number"):
        TransducerJoiner(0)
