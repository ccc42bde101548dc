# SPDX-License-Identifier: Apache-2.0
"""FusedRnntLoss: the full RNN-T loss of the joiner's inputs, through Keras.

It must equal RnntLoss on the same joiner's full logits (values and the
gradients of everything trained), train a Transducer through `fit` to the
same weights, and survive config and .keras round trips.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import tf_transducer as tt
from tf_transducer.layers import TransducerJoiner
from tf_transducer.losses import FusedRnntLoss
from tf_transducer.losses import RnntLoss

C, J = 7, 5  # classes (blank 0), joint width
FRAMES = [6, 4, 5]
LABELS = [[1, 2, 3], [4], [5, 6]]
OPTIONS = {
    "regular": dict(),
    "regular+clamp+fastemit": dict(clamp=0.5, fastemit_lambda=0.1),
    "modified+delay": dict(rnnt_type="modified", delay_penalty=0.02),
    "constrained": dict(rnnt_type="constrained", fastemit_lambda=0.05),
}


def joiner(seed=0):
    """A built TransducerJoiner with a nonzero output bias."""
    keras.utils.set_random_seed(seed)
    layer = TransducerJoiner(C, J)
    layer.build((None, 3), (None, 3))
    bias = np.random.default_rng(seed).normal(size=C).astype(np.float32)
    layer.output_projection.bias.assign(bias)
    return layer


def projections(rng, t_pad=7, s_pad=4):
    """(encoder [B, T, J], decoder [B, S + 1, J], labels [B, S] padded with -1)."""
    B = len(FRAMES)
    encoder = rng.normal(size=(B, t_pad, J)).astype(np.float32)
    decoder = rng.normal(size=(B, s_pad + 1, J)).astype(np.float32)
    labels = np.full((B, s_pad), -1, np.int32)
    for b, seq in enumerate(LABELS):
        labels[b, : len(seq)] = seq
    return encoder, decoder, labels


def masked(x, lengths):
    x = tf.convert_to_tensor(x)
    x._keras_mask = tf.sequence_mask(lengths, tf.shape(x)[1])
    return x


def both_losses(layer, encoder, decoder, labels, options, weights=None, mask=True):
    """(full, fused) losses [B] and their gradients with respect to encoder,
    decoder, kernel and bias."""
    encoder, decoder = tf.Variable(encoder), tf.Variable(decoder)
    sources = [encoder, decoder, *layer.output_weights()]
    results = []
    for loss in (
        RnntLoss(reduction="none", **options),
        FusedRnntLoss(reduction="none", **options),
    ):
        with tf.GradientTape() as tape:
            enc = tf.identity(encoder)
            if isinstance(loss, FusedRnntLoss):
                y_pred = dict(encoder=enc, decoder=decoder, joiner=layer)
                if mask:
                    y_pred["encoder"] = masked(enc, FRAMES)
                else:
                    y_pred["logit_lengths"] = tf.constant(FRAMES)
            else:  # the joiner's full logits, frames from their mask
                y_pred = masked(
                    layer.joint(enc[:, :, None, :], decoder[:, None, :, :]), FRAMES
                )
            values = loss(labels, y_pred, sample_weight=weights)
            total = tf.reduce_sum(values)
        results.append((values.numpy(), tape.gradient(total, sources)))
    return results


def assert_gradients_equal(got, want, rtol=1e-5):
    for name, g, w in zip(("encoder", "decoder", "kernel", "bias"), got, want,
                          strict=True):  # fmt: skip
        w = tf.convert_to_tensor(w).numpy()
        g = tf.convert_to_tensor(g).numpy()
        scale = np.abs(w).max()
        assert scale > 0, name
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * scale, err_msg=name)


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_equals_the_full_loss_on_the_joiners_logits(option):
    layer = joiner()
    encoder, decoder, labels = projections(np.random.default_rng(1))
    (full, full_grads), (fused, fused_grads) = both_losses(
        layer, encoder, decoder, labels, OPTIONS[option]
    )
    assert np.all(np.isfinite(full)) and np.all(full > 0)
    np.testing.assert_allclose(fused, full, rtol=1e-5)
    assert_gradients_equal(fused_grads, full_grads)


@pytest.mark.parametrize("option", ["regular", "modified+delay"])
def test_a_batch_of_empty_transcripts_equals_the_full_loss(option):
    # y_true [B, 0] and decoder [B, 1, J]: every frame emits a blank.
    layer = joiner()
    rng = np.random.default_rng(5)
    encoder = projections(rng)[0]
    decoder = rng.normal(size=(len(FRAMES), 1, J)).astype(np.float32)
    labels = np.zeros((len(FRAMES), 0), np.int32)
    (full, full_grads), (fused, fused_grads) = both_losses(
        layer, encoder, decoder, labels, OPTIONS[option]
    )
    logits = layer.joint(encoder[:, :, None, :], decoder[:, None, :, :]).numpy()
    log_p = logits[:, :, 0] - np.log(np.sum(np.exp(logits[:, :, 0]), -1, keepdims=True))
    used = np.arange(encoder.shape[1])[None] < np.array(FRAMES)[:, None]
    by_hand = -np.sum(np.where(used, log_p[..., 0], 0), axis=1)
    np.testing.assert_allclose(fused, by_hand, rtol=1e-5)
    np.testing.assert_allclose(full, by_hand, rtol=1e-5)
    assert_gradients_equal(fused_grads, full_grads)


def test_lengths_sample_weights_and_padding_garbage():
    """logit_lengths instead of a mask, sample weights, and padding frames and
    label rows that hold NaN: the same losses and gradients."""
    layer = joiner(3)
    encoder, decoder, labels = projections(np.random.default_rng(4), 9, 5)
    weights = np.array([0.5, 1.0, 2.0], np.float32)
    want = both_losses(layer, encoder, decoder, labels, {}, weights)[0]
    for b, (t, seq) in enumerate(zip(FRAMES, LABELS, strict=True)):
        encoder[b, t:] = np.nan
        decoder[b, len(seq) + 1 :] = np.nan
    got = both_losses(layer, encoder, decoder, labels, {}, weights, mask=False)[1]
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    for b, (t, seq) in enumerate(zip(FRAMES, LABELS, strict=True)):
        assert np.all(got[1][0].numpy()[b, t:] == 0), "padding frames: no gradient"
        assert np.all(got[1][1].numpy()[b, len(seq) + 1 :] == 0), "label padding"
    assert_gradients_equal(got[1], want[1])


def transducer(seed=0):
    keras.utils.set_random_seed(seed)
    model = tt.models.Transducer(
        C,
        tt.layers.TransducerEncoder(units=6, num_layers=1, stack=2),
        tt.layers.PredictionNetwork(C, embedding_dim=4, units=6),
        tt.layers.TransducerJoiner(C, units=J),
        feature_dim=4,
    )
    model.build()
    return model


def batch(rng):
    """Features [3, 12, 4] with frames [12, 8, 10], labels padded with -1."""
    features = rng.normal(size=(3, 12, 4)).astype(np.float32)
    lengths = np.array([12, 8, 10], np.int32)
    labels = np.array([[1, 2, 3], [4, -1, -1], [5, 6, -1]], np.int32)
    return (features, lengths), labels


def test_transducer_loss_and_gradients_equal_the_full_loss():
    model = transducer()
    x, y = batch(np.random.default_rng(0))
    results = []
    for loss in (RnntLoss(), FusedRnntLoss()):
        model.compile(optimizer="sgd", loss=loss, jit_compile=False)
        with tf.GradientTape() as tape:
            value = model.compute_loss(x, y, model(x, training=False), training=False)
        results.append((value, tape.gradient(value, model.trainable_weights)))
    (full, full_grads), (fused, fused_grads) = results
    np.testing.assert_allclose(fused, full, rtol=1e-5)
    assert len(full_grads) == len(model.trainable_weights) > 4
    for weight, g, w in zip(model.trainable_weights, fused_grads, full_grads,
                            strict=True):  # fmt: skip
        w = tf.convert_to_tensor(w).numpy()
        g = tf.convert_to_tensor(g).numpy()
        np.testing.assert_allclose(
            g, w, rtol=1e-5, atol=1e-5 * np.abs(w).max(), err_msg=weight.path
        )


@pytest.mark.parametrize("jit_compile", [False, True])
def test_a_fit_step_equals_the_full_loss_step(jit_compile):
    """The fused step (under XLA: its pure-TensorFlow twin) is the full one."""
    x, y = batch(np.random.default_rng(2))
    models, losses = [], []
    for loss, jit in ((RnntLoss(), False), (FusedRnntLoss(), jit_compile)):
        model = transducer(5)
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss, jit_compile=jit)
        history = model.fit(x, y, batch_size=3, epochs=1, shuffle=False, verbose=0)
        models.append(model)
        losses.append(history.history["loss"][0])
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
    full, fused = models
    start = transducer(5)
    moved = 0
    for a, b, s in zip(fused.weights, full.weights, start.weights, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6, err_msg=a.path)
        moved += not np.array_equal(a.numpy(), s.numpy())
    assert moved > 4  # the step trained the encoder, predictor and joiner


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_is_near_float32(policy):
    """The float32 kernel and bias are cast to the 16-bit projections."""
    x, y = batch(np.random.default_rng(7))
    want = transducer()
    want.compile(loss=FusedRnntLoss(), jit_compile=False)
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        model = transducer()
    finally:
        keras.config.set_dtype_policy(previous)
    model.set_weights(want.get_weights())
    model.compile(loss=FusedRnntLoss(), jit_compile=False)
    values = [
        m.compute_loss(x, y, m(x, training=False), training=False).numpy()
        for m in (want, model)
    ]
    assert values[1].dtype == np.float32
    np.testing.assert_allclose(values[1], values[0], rtol=2e-2)


def test_config_round_trip_and_saved_model_keeps_the_loss(tmp_path):
    loss = FusedRnntLoss(
        blank=1, rnnt_type="modified", delay_penalty=0.01, pad_id=-3, clamp=2.0,
        fastemit_lambda=0.1, reduction="sum", name="fused", allow_tf32=True,
    )  # fmt: skip
    config = loss.get_config()
    assert config["allow_tf32"] is True
    assert FusedRnntLoss.from_config(config).get_config() == config
    revived = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(loss)
    )
    assert type(revived) is FusedRnntLoss and revived.get_config() == config

    model = transducer()
    model.compile(
        optimizer="adam", loss=FusedRnntLoss(delay_penalty=0.01), jit_compile=False
    )
    x, y = batch(np.random.default_rng(3))
    model.fit(x, y, batch_size=3, epochs=1, verbose=0)  # Adam has moments now
    want = model.compute_loss(x, y, model(x, training=False), training=False)
    path = str(tmp_path / "model.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    assert isinstance(restored.loss, FusedRnntLoss)
    assert restored.loss.get_config() == model.loss.get_config()
    got = restored.compute_loss(x, y, restored(x, training=False), training=False)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # Training goes on as it would have: the optimizer's state came back too.
    for m in (model, restored):
        m.fit(x, y, batch_size=3, epochs=1, verbose=0, shuffle=False)
    for a, b in zip(restored.weights, model.weights, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6, err_msg=a.path)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(blank=-1), "blank must be an int >= 0"),
        (dict(pad_id=0), "pad_id must differ from blank"),
        (dict(pad_id=1.5), "pad_id must be an int"),
        (dict(rnnt_type="fancy"), "rnnt_type must be one of"),
        (dict(delay_penalty=-0.1), "delay_penalty must be >= 0"),
        (dict(clamp=float("nan")), "clamp must be a number"),
        (dict(fastemit_lambda=-0.1), "fastemit_lambda must be >= 0"),
        (dict(reduction="max"), "reduction must be one of"),
        (dict(allow_tf32="yes"), "allow_tf32 must be True or False, got 'yes'"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FusedRnntLoss(**kwargs)


class NoActivation:
    def output_weights(self):
        return tf.zeros([J, C]), tf.zeros([C])


def test_bad_y_pred_is_named():
    layer = joiner()
    encoder, decoder, labels = projections(np.random.default_rng(5))
    y_pred = dict(encoder=encoder, decoder=decoder, joiner=layer)
    loss = FusedRnntLoss()
    with pytest.raises(ValueError, match="y_pred must be a mapping"):
        loss(labels, encoder)
    with pytest.raises(ValueError, match=r"lacks the keys \['joiner'\]"):
        loss(labels, dict(encoder=encoder, decoder=decoder))
    with pytest.raises(ValueError, match=r'y_pred\["joiner"\] must have output_w'):
        loss(labels, dict(y_pred, joiner=layer.joint))
    with pytest.raises(ValueError, match=r'y_pred\["joiner"\].activation must be'):
        loss(labels, dict(y_pred, joiner=NoActivation()))
    with pytest.raises(ValueError, match="must be built"):
        loss(labels, dict(y_pred, joiner=TransducerJoiner(C, J)))
    with pytest.raises(ValueError, match=r'y_pred\["decoder"\] must be float \[B, S'):
        loss(labels, dict(y_pred, decoder=decoder[0]))
    with pytest.raises(ValueError, match=r"joint width J must agree"):
        loss(labels, dict(y_pred, decoder=decoder[..., :3]))
    with pytest.raises(ValueError, match=r'y_pred\["decoder"\] must have the dtype'):
        loss(labels, dict(y_pred, decoder=decoder.astype(np.float64)))
    with pytest.raises(ValueError, match=r"blank=7 is not a class of the joiner"):
        FusedRnntLoss(blank=7)(labels, y_pred)
    with pytest.raises(tf.errors.InvalidArgumentError, match="S \\+ 1 = 4 rows"):
        loss(labels[:, :3], y_pred)
    bad = labels.copy()
    bad[1, 0] = C
    with pytest.raises(tf.errors.InvalidArgumentError, match="y_true labels must"):
        loss(bad, y_pred)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"y_pred\[\"encoder\"\]"):
        hole = tf.constant([[True, False] + [True] * 5] * 3)
        enc = tf.convert_to_tensor(encoder)
        enc._keras_mask = hole
        loss(labels, dict(y_pred, encoder=enc))


def test_the_transducer_names_the_losses_it_takes():
    model = transducer()
    model.compile(optimizer="sgd", loss=tt.CtcLoss())
    x, y = batch(np.random.default_rng(6))
    with pytest.raises(ValueError, match="FusedRnntLoss"):
        model.compute_loss(x, y, model(x, training=False))
