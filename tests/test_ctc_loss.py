# SPDX-License-Identifier: Apache-2.0
"""CtcLoss: values against tf.nn.ctc_loss, padding, impossible labels, config."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.decoding.test_ctc_decoding import ctc_log_prob
from tests.decoding.test_ctc_decoding import log_softmax
from tf_transducer.losses import CtcLoss
from tf_transducer.losses import ctc_feasible


def test_matches_the_forward_algorithm_on_each_utterance():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 9, 5))
    labels = np.array([[1, 2, 2, 3], [4, 1, -1, -1], [3, -1, -1, -1]])
    lengths = [9, 6, 2]
    mask = tf.sequence_mask(lengths, 9)
    y_pred = tf.constant(logits, tf.float32)
    y_pred._keras_mask = mask
    got = CtcLoss(reduction="none")(labels, y_pred).numpy()
    for b in range(3):
        want = -ctc_log_prob(
            log_softmax(logits[b, : lengths[b]]), labels[b][labels[b] >= 0]
        )
        np.testing.assert_allclose(got[b], want, rtol=1e-5)


def test_padding_does_not_change_the_loss():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(2, 7, 4)).astype(np.float32)
    labels = np.array([[1, 2], [3, -1]])
    loss = CtcLoss()
    short = loss(labels, logits)
    padded_logits = np.concatenate([logits, rng.normal(size=(2, 5, 4))], 1)
    y_pred = tf.constant(padded_logits, tf.float32)
    y_pred._keras_mask = tf.sequence_mask([7, 7], 12)
    padded_labels = np.array([[1, 2, -1, -1], [3, -1, -1, -1]])
    np.testing.assert_allclose(loss(padded_labels, y_pred), short, rtol=1e-6)


def test_labels_of_width_zero_score_the_all_blank_path():
    # tf.nn.ctc_loss alone scores a [B, 0] label batch wrongly.
    logits = np.random.default_rng(4).normal(size=(2, 5, 6)).astype(np.float32)
    got = CtcLoss(reduction="none")(np.zeros((2, 0), np.int64), logits)
    want = -log_softmax(logits.astype(np.float64))[..., 0].sum(1)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_nan_or_inf_logits_are_named_unless_in_the_padding():
    logits = np.random.default_rng(5).normal(size=(2, 6, 4)).astype(np.float32)
    labels = np.array([[1, 2], [3, -1]])
    loss = CtcLoss(reduction="none")
    want = loss(labels, logits[:, :4])
    logits[1, 4:] = np.nan  # padding: never read
    y_pred = tf.constant(logits)
    y_pred._keras_mask = tf.sequence_mask([4, 4], 6)
    np.testing.assert_allclose(loss(labels, y_pred), want, rtol=1e-6)
    for bad in (np.nan, np.inf):
        logits[0, 1, 2] = bad
        with pytest.raises(tf.errors.InvalidArgumentError, match="y_pred must be"):
            loss(labels, logits)


def test_a_frame_mask_with_holes_is_named():
    y_pred = tf.constant(np.zeros((1, 4, 3), np.float32))
    y_pred._keras_mask = tf.constant([[True, False, True, False]])
    with pytest.raises(tf.errors.InvalidArgumentError, match="y_pred's Keras mask"):
        CtcLoss()([[1]], y_pred)


def test_impossible_alignments_are_inf_or_zero_with_finite_gradients():
    labels = np.array([[1, 1, 1], [1, 2, -1]])  # 1 1 1 needs 5 frames
    assert ctc_feasible(labels, [3, 2], [4, 4]).numpy().tolist() == [False, True]
    logits = tf.Variable(
        np.random.default_rng(2).normal(size=(2, 4, 3)), dtype=tf.float32
    )
    assert np.isinf(CtcLoss(reduction="none")(labels, logits)[0])
    with tf.GradientTape() as tape:
        losses = CtcLoss(zero_infinity=True, reduction="none")(labels, logits)
        total = tf.reduce_sum(losses)
    grad = tape.gradient(total, logits).numpy()
    assert losses[0] == 0.0 and np.isfinite(losses[1])
    assert np.all(np.isfinite(grad)) and np.all(grad[0] == 0)


def test_trains_in_fit_and_round_trips_its_config():
    keras.utils.set_random_seed(3)
    inputs = keras.Input((None, 6))
    model = keras.Model(inputs, keras.layers.Dense(5)(keras.layers.Dense(16)(inputs)))
    model.compile(
        optimizer=keras.optimizers.Adam(0.05), loss=CtcLoss(zero_infinity=True)
    )
    x = np.random.default_rng(4).normal(size=(8, 10, 6)).astype(np.float32)
    y = np.tile([[1, 2, 3, -1]], (8, 1))
    history = model.fit(x, y, epochs=20, verbose=0).history["loss"]
    assert history[-1] < 0.5 * history[0]
    loss = CtcLoss(blank=4, pad_id=-2, zero_infinity=True, reduction="sum")
    assert CtcLoss.from_config(loss.get_config()).get_config() == loss.get_config()
    with pytest.raises(ValueError, match=r"y_pred must be logits \[B, T, C\]"):
        CtcLoss()(y, x[:, 0])
