# SPDX-License-Identifier: Apache-2.0
"""Keras losses: values, padding, training with fit, serialization."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import tf_transducer as tt
from tf_transducer.losses import RnntLoss

C = 5  # classes, blank 0


@keras.saving.register_keras_serializable(package="tf_transducer_tests")
class Joiner(keras.layers.Layer):
    """enc [B, T, H] (masked) + dec [B, S + 1, H] -> logits [B, T, S + 1, C].

    The output keeps the encoder's frame mask, which RnntLoss reads.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.out = keras.layers.Dense(C)

    def call(self, enc, dec):
        return self.out(keras.ops.tanh(enc[:, :, None, :] + dec[:, None, :, :]))

    def compute_mask(self, inputs, previous_mask=None):
        # The mask of the first input (enc), however Keras passes it.
        if isinstance(previous_mask, (list, tuple)):
            return previous_mask[0]
        return previous_mask


def make_model():
    features = keras.Input((None, 3))
    context = keras.Input((None,), dtype="int32")  # blank, then the labels
    enc = keras.layers.Dense(8)(keras.layers.Masking(0.0)(features))
    dec = keras.layers.Embedding(C, 8)(context)
    return keras.Model([features, context], Joiner()(enc, dec))


def batch(rng, frames, labels, t_pad, s_pad):
    """Features padded with zeros (masked), labels padded with -1."""
    B = len(frames)
    x = np.zeros((B, t_pad, 3), np.float32)
    y = np.full((B, s_pad), -1, np.int64)
    for b, (t, seq) in enumerate(zip(frames, labels, strict=True)):
        x[b, :t] = rng.normal(size=(t, 3)) + 0.1
        y[b, : len(seq)] = seq
    context = np.concatenate([np.zeros((B, 1), np.int64), np.maximum(y, 0)], axis=1)
    return (x, context), y


def test_matches_the_functional_loss_with_lengths():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 6, 4, C))
    labels = np.array([[1, 2, 3], [4, 1, -1]])
    got = RnntLoss(reduction="none")(labels, logits)
    want = tt.rnnt_loss(
        logits,
        np.maximum(labels, 0),
        0,
        reduction="none",
        logit_lengths=[6, 6],
        label_lengths=[3, 2],
    )
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(RnntLoss()(labels, logits), np.mean(want), rtol=1e-6)


def test_padding_does_not_change_loss_or_gradients():
    keras.utils.set_random_seed(0)
    model = make_model()
    loss_fn = RnntLoss()
    frames, labels = [5, 3], [[1, 2], [3]]
    results = []
    for t_pad, s_pad in ((5, 2), (9, 4)):
        inputs, y = batch(np.random.default_rng(1), frames, labels, t_pad, s_pad)
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(inputs))
        grads = tape.gradient(loss, model.trainable_variables)
        results.append((loss.numpy(), [tf.convert_to_tensor(g).numpy() for g in grads]))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5)
    for a, b in zip(results[0][1], results[1][1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def dataset(rng, n=16):
    frames = rng.integers(4, 9, size=n)
    labels = [list(rng.integers(1, C, size=rng.integers(1, 4))) for _ in range(n)]
    items = [batch(rng, [t], [s], 8, 3) for t, s in zip(frames, labels, strict=True)]
    x = np.concatenate([i[0][0] for i in items])
    ctx = np.concatenate([i[0][1] for i in items])
    y = np.concatenate([i[1] for i in items])
    return tf.data.Dataset.from_tensor_slices(((x, ctx), y)).batch(4)


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_fit_lowers_the_loss(jit_compile):
    keras.utils.set_random_seed(2)
    model = make_model()
    model.compile(
        optimizer=keras.optimizers.Adam(0.05), loss=RnntLoss(), jit_compile=jit_compile
    )
    history = model.fit(
        dataset(np.random.default_rng(3)), epochs=5, verbose=0, shuffle=False
    )
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses))
    assert losses[-1] < 0.8 * losses[0], losses


def test_config_round_trip_and_saved_model_keeps_the_loss(tmp_path):
    loss = RnntLoss(
        blank=2, rnnt_type="modified", delay_penalty=0.1, pad_id=-7, clamp=2.0
    )
    clone = RnntLoss.from_config(loss.get_config())
    assert (
        clone.blank,
        clone.rnnt_type,
        clone.delay_penalty,
        clone.pad_id,
        clone.clamp,
    ) == (2, "modified", 0.1, -7, 2.0)
    keras.utils.set_random_seed(4)
    model = make_model()
    model.compile(optimizer="adam", loss=loss)
    path = str(tmp_path / "model.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    assert isinstance(restored.loss, RnntLoss)
    assert restored.loss.get_config() == loss.get_config()


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(blank=-1), "blank must be an int >= 0"),
        (dict(rnnt_type="ctc"), "rnnt_type must be one of"),
        (dict(delay_penalty=-1.0), "delay_penalty must be >= 0"),
        (dict(pad_id=0), "pad_id must differ from blank"),
        (dict(reduction="max"), "reduction must be one of"),
        (dict(fastemit_lambda=-0.1), "fastemit_lambda must be >= 0"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RnntLoss(**kwargs)


def test_evaluate_sees_the_frame_mask_inside_the_compiled_loss():
    # The same utterances padded to 6 or 11 frames (and 2 or 4 labels) give
    # the same compiled loss: the mask reaches RnntLoss inside fit/evaluate.
    keras.utils.set_random_seed(5)
    model = make_model()
    model.compile(loss=RnntLoss())
    frames, labels = [6, 4, 2], [[1, 2], [3], [4, 4]]
    values = []
    for t_pad, s_pad in ((6, 2), (11, 4)):
        inputs, y = batch(np.random.default_rng(6), frames, labels, t_pad, s_pad)
        values.append(model.evaluate(inputs, y, batch_size=3, verbose=0))
    np.testing.assert_allclose(values[0], values[1], rtol=1e-5)


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_neural_transducer_loss_names_num_blocks_of_the_wrong_size(graph):
    # B + 1 entries: named, not a TensorFlow broadcast error.
    B, NB, U, W, V = 2, 3, 2, 3, 5
    logits = tf.zeros([B, NB, U + 1, W, V])
    labels = np.array([[1, 2], [1, -1]])
    loss = tt.NeuralTransducerLoss(W, V - 1, reduction="none")

    def call(num_blocks):
        return loss(labels, {"logits": logits, "num_blocks": num_blocks})

    fn = tf.function(call) if graph else call
    with pytest.raises(
        ValueError,
        match=r'y_pred\["num_blocks"\] must hold one entry per sequence '
        r"\(B = 2\), got 3",
    ):
        fn(tf.constant([3, 2, 1]))
    # Sizes known only at run time: an InvalidArgumentError, also named.
    dynamic = tf.function(call, input_signature=[tf.TensorSpec([None], tf.int32)])
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r'y_pred\[\\?"num_blocks\\?"\] must hold one entry per sequence',
    ):
        dynamic(tf.constant([3, 2, 1]))
    # B entries: uniform log-probs over V outputs, one per aligned output
    # (two labels then <e> in the first sequence's 3 blocks, one label then
    # <e> in the second's 2, plus <e> for each block without a label).
    want = [(2 + 3) * np.log(V), (1 + 2) * np.log(V)]
    np.testing.assert_allclose(dynamic(tf.constant([3, 2])), want, rtol=1e-6)


def blank_loss_by_hand(logits, frames, blank=0):
    """-sum over each sequence's frames of log P(blank): its loss for no labels."""
    logits = np.asarray(logits, np.float64)[:, :, 0]  # [B, T, C]: the one row
    log_p = logits - np.log(np.sum(np.exp(logits), axis=-1, keepdims=True))
    used = np.arange(logits.shape[1])[None] < np.asarray(frames)[:, None]
    return -np.sum(np.where(used, log_p[..., blank], 0), axis=1)


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_a_batch_of_empty_transcripts_is_the_blank_of_every_frame(graph):
    # y_true [B, 0]: every frame emits a blank (torchaudio's max_target_length 0).
    keras.utils.set_random_seed(0)
    model = make_model()
    frames = [6, 3, 4]
    (x, context), y = batch(np.random.default_rng(3), frames, [[], [], []], 7, 0)
    assert y.shape == (3, 0) and context.shape == (3, 1)
    loss = RnntLoss(reduction="none")

    def step(x, context):
        with tf.GradientTape() as tape:
            logits = model((x, context))  # [B, T, 1, C], masked to `frames`
            values = loss(y, logits)
            total = tf.reduce_sum(values)
        return logits, values, tape.gradient(total, model.trainable_variables)

    logits, values, grads = (tf.function(step) if graph else step)(x, context)
    np.testing.assert_allclose(values, blank_loss_by_hand(logits, frames), rtol=1e-5)
    grads = [tf.convert_to_tensor(g).numpy() for g in grads]
    assert all(np.all(np.isfinite(g)) for g in grads)
    assert any(np.any(g != 0) for g in grads)
