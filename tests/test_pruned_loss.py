# SPDX-License-Identifier: Apache-2.0
"""PrunedRnntLoss: values, padding, training with fit, serialization."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import tf_transducer as tt
from tf_transducer.losses import PrunedRnntLoss

C, H = 6, 8  # classes (blank 0), joiner width


@keras.saving.register_keras_serializable(package="tf_transducer_tests")
class AddTanhJoiner(keras.layers.Layer):
    """(enc [..., H], dec [..., H]) -> Dense(C)(tanh(enc + dec))."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.out = keras.layers.Dense(C)

    def call(self, enc, dec):
        return self.out(keras.ops.tanh(enc + dec))


@keras.saving.register_keras_serializable(package="tf_transducer_tests")
class TinyTransducer(keras.Model):
    """features [B, T, 3], context [B, S + 1], frames [B] -> PrunedRnntLoss's dict."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.encoder = keras.layers.Dense(H)
        self.embedding = keras.layers.Embedding(C, H)
        self.simple_am = keras.layers.Dense(C)
        self.simple_lm = keras.layers.Dense(C)
        self.joiner = AddTanhJoiner()

    def build(self, input_shape):  # the joiner too: the loss calls it
        features, context, _ = input_shape
        self.encoder.build(features)
        self.embedding.build(context)
        self.simple_am.build((None, None, H))
        self.simple_lm.build((None, None, H))
        self.joiner.out.build((None, H))
        self.joiner.built = True

    def call(self, inputs):
        features, context, frames = inputs
        enc = self.encoder(features)
        dec = self.embedding(context)
        return dict(
            am=self.simple_am(enc),
            lm=self.simple_lm(dec),
            encoder=enc,
            decoder=dec,
            logit_lengths=frames,
        )

    def full_logits(self, y_pred):
        enc, dec = y_pred["encoder"], y_pred["decoder"]
        return self.joiner(enc[:, :, None, :], dec[:, None, :, :])

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        return self.loss(y, dict(y_pred, joiner=self.joiner), sample_weight)


def batch(rng, frames, labels, t_pad, s_pad):
    """Features padded with zeros, labels padded with -1."""
    B = len(frames)
    x = np.zeros((B, t_pad, 3), np.float32)
    y = np.full((B, s_pad), -1, np.int64)
    for b, (t, seq) in enumerate(zip(frames, labels, strict=True)):
        x[b, :t] = rng.normal(size=(t, 3))
        y[b, : len(seq)] = seq
    context = np.concatenate([np.zeros((B, 1), np.int64), np.maximum(y, 0)], axis=1)
    return (x, context, np.array(frames, np.int64)), y


FRAMES = [7, 5, 3]
LABELS = [[1, 2, 3, 4], [5], [2, 2]]


def test_wide_range_and_no_simple_loss_is_the_full_loss():
    keras.utils.set_random_seed(0)
    model = TinyTransducer()
    inputs, y = batch(np.random.default_rng(1), FRAMES, LABELS, 8, 5)
    y_pred = model(inputs)
    loss = PrunedRnntLoss(s_range=6, simple_loss_scale=0.0, reduction="none")
    got = loss(y, dict(y_pred, joiner=model.joiner))
    logits = model.full_logits(y_pred)
    want = tt.rnnt_loss(
        logits,
        np.maximum(y, 0),
        0,
        reduction="none",
        logit_lengths=FRAMES,
        label_lengths=[4, 1, 2],
    )
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("jit_compile", [False, True], ids=["op", "xla"])
def test_clamp_and_fastemit_act_on_the_pruned_loss_as_on_the_full_one(jit_compile):
    keras.utils.set_random_seed(0)
    model = TinyTransducer()
    inputs, y = batch(np.random.default_rng(1), FRAMES, LABELS, 8, 5)
    model(inputs)
    options = dict(clamp=0.05, fastemit_lambda=0.5)
    shared = [  # what both losses reach (not the simple projections)
        *model.encoder.trainable_variables,
        *model.embedding.trainable_variables,
        *model.joiner.trainable_variables,
    ]

    def gradients(loss_of):
        @tf.function(jit_compile=jit_compile)
        def run():
            with tf.GradientTape() as tape:
                loss = loss_of(model(inputs))
            grads = tape.gradient(loss, shared)
            return loss, [tf.convert_to_tensor(g) for g in grads]  # embedding

        return run()

    def pruned(**kw):
        loss = PrunedRnntLoss(s_range=6, simple_loss_scale=0.0, reduction="sum", **kw)
        return lambda y_pred: loss(y, dict(y_pred, joiner=model.joiner))

    def full(**kw):
        return lambda y_pred: tt.rnnt_loss(
            model.full_logits(y_pred), np.maximum(y, 0), 0, reduction="sum",
            logit_lengths=FRAMES, label_lengths=[4, 1, 2], **kw,
        )  # fmt: skip

    got, got_grads = gradients(pruned(**options))
    want, want_grads = gradients(full(**options))
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert len(got_grads) == 5
    for g, w in zip(got_grads, want_grads, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)
    _, plain = gradients(pruned())
    assert not np.allclose(plain[0], got_grads[0], atol=1e-4)  # the options act
    config = PrunedRnntLoss(**options).get_config()
    assert config["clamp"] == 0.05 and config["fastemit_lambda"] == 0.5


def test_simple_part_is_the_simple_loss():
    keras.utils.set_random_seed(0)
    model = TinyTransducer()
    inputs, y = batch(np.random.default_rng(2), FRAMES, LABELS, 8, 5)
    y_pred = dict(model(inputs), joiner=model.joiner)
    parts = PrunedRnntLoss(lm_only_scale=0.0).components(y, y_pred)
    want = tt.rnnt_loss_simple(
        y_pred["lm"],
        y_pred["am"],
        np.maximum(y, 0),
        0,
        reduction="none",
        logit_lengths=FRAMES,
        label_lengths=[4, 1, 2],
    )
    np.testing.assert_allclose(parts["simple"], want, rtol=1e-6)
    total = PrunedRnntLoss(
        lm_only_scale=0.0, simple_loss_scale=0.3, pruned_loss_scale=2.0, reduction="sum"
    )(y, y_pred)
    np.testing.assert_allclose(
        total, np.sum(0.3 * want + 2.0 * parts["pruned"]), rtol=1e-5
    )
    # The pruned loss bounds the full one from below: fewer paths.
    full = tt.rnnt_loss(
        model.full_logits(y_pred),
        np.maximum(y, 0),
        0,
        reduction="none",
        logit_lengths=FRAMES,
        label_lengths=[4, 1, 2],
    )
    assert np.all(parts["pruned"].numpy() >= full.numpy() - 1e-5)


@pytest.mark.parametrize("rnnt_type", ["regular", "modified"])
def test_padding_does_not_change_loss_or_gradients(rnnt_type):
    keras.utils.set_random_seed(3)
    model = TinyTransducer()
    loss_fn = PrunedRnntLoss(s_range=2, rnnt_type=rnnt_type)
    results = []
    for t_pad, s_pad in ((7, 4), (12, 9)):
        inputs, y = batch(np.random.default_rng(4), FRAMES, LABELS, t_pad, s_pad)
        with tf.GradientTape() as tape:
            loss = loss_fn(y, dict(model(inputs), joiner=model.joiner))
        grads = tape.gradient(loss, model.trainable_variables)
        results.append((loss.numpy(), [tf.convert_to_tensor(g).numpy() for g in grads]))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5)
    for a, b in zip(results[0][1], results[1][1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def dataset(rng, n=16):
    frames = rng.integers(4, 9, size=n)
    labels = [list(rng.integers(1, C, size=rng.integers(1, 4))) for _ in range(n)]
    items = [batch(rng, [t], [s], 8, 3) for t, s in zip(frames, labels, strict=True)]
    x = tuple(np.concatenate([i[0][k] for i in items]) for k in range(3))
    y = np.concatenate([i[1] for i in items])
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(4)


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_fit_lowers_the_loss(jit_compile):
    keras.utils.set_random_seed(5)
    model = TinyTransducer()
    model.compile(
        optimizer=keras.optimizers.Adam(0.05),
        loss=PrunedRnntLoss(s_range=2),
        jit_compile=jit_compile,
    )
    history = model.fit(
        dataset(np.random.default_rng(6)), epochs=5, verbose=0, shuffle=False
    )
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses))
    assert losses[-1] < 0.8 * losses[0], losses


def test_config_round_trip_and_saved_model_keeps_the_loss(tmp_path):
    loss = PrunedRnntLoss(
        s_range=3,
        simple_loss_scale=0.2,
        pruned_loss_scale=0.7,
        lm_only_scale=0.1,
        am_only_scale=0.05,
        blank=1,
        rnnt_type="constrained",
        delay_penalty=0.01,
        pad_id=-3,
    )
    assert PrunedRnntLoss.from_config(loss.get_config()).get_config() == (
        loss.get_config()
    )
    keras.utils.set_random_seed(7)
    model = TinyTransducer()
    model.compile(optimizer="adam", loss=loss)
    inputs, _ = batch(np.random.default_rng(8), FRAMES, LABELS, 8, 5)
    model(inputs)
    path = str(tmp_path / "model.keras")
    model.save(path)
    restored = keras.models.load_model(path)
    assert isinstance(restored.loss, PrunedRnntLoss)
    assert restored.loss.get_config() == loss.get_config()


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(s_range=1), "s_range must be an int >= 2 for rnnt_type='regular'"),
        (dict(s_range=0, rnnt_type="modified"), "s_range must be an int >= 1"),
        (dict(simple_loss_scale=-1.0), "simple_loss_scale must be >= 0"),
        (dict(pruned_loss_scale=-1.0), "pruned_loss_scale must be >= 0"),
        (dict(lm_only_scale=0.6, am_only_scale=0.5), "must be < 1"),
        (dict(blank=-1), "blank must be an int >= 0"),
        (dict(pad_id=0), "pad_id must differ from blank"),
        (dict(clamp=float("nan")), "clamp must be a number"),
        (dict(fastemit_lambda=-0.1), "fastemit_lambda must be >= 0"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PrunedRnntLoss(**kwargs)


def test_bad_y_pred():
    keras.utils.set_random_seed(0)
    model = TinyTransducer()
    inputs, y = batch(np.random.default_rng(1), FRAMES, LABELS, 8, 5)
    y_pred = model(inputs)
    loss = PrunedRnntLoss()
    with pytest.raises(ValueError, match="y_pred must be a mapping"):
        loss(y, y_pred["am"])
    with pytest.raises(ValueError, match=r"lacks the keys \['joiner'\]"):
        loss(y, y_pred)
    with pytest.raises(ValueError, match="must be callable"):
        loss(y, dict(y_pred, joiner=3))


@pytest.mark.parametrize("name", ["lm", "am"])
def test_simple_part_names_a_row_of_minus_infinity(name):
    keras.utils.set_random_seed(0)
    model = TinyTransducer()
    inputs, y = batch(np.random.default_rng(1), FRAMES, LABELS, 8, 5)
    y_pred = dict(model(inputs), joiner=model.joiner)
    y_pred[name] = tf.fill(tf.shape(y_pred[name]), float("-inf"))
    for loss in (PrunedRnntLoss(lm_only_scale=0.0), PrunedRnntLoss()):
        with pytest.raises(
            tf.errors.InvalidArgumentError,
            match=f"{name} must hold a value above -inf in every",
        ):
            loss(y, y_pred)


def test_a_batch_of_empty_transcripts_is_the_blank_of_every_frame():
    # y_true [B, 0]: the one row s = 0 is kept, and both parts are minus the
    # sum over each sequence's frames of log P(blank).
    keras.utils.set_random_seed(0)
    model = TinyTransducer()
    inputs, y = batch(np.random.default_rng(6), FRAMES, [[], [], []], 8, 0)
    y_pred = dict(model(inputs), joiner=model.joiner)
    parts = PrunedRnntLoss(lm_only_scale=0.0).components(y, y_pred)

    def by_hand(logits):  # [B, T, C]
        log_p = logits - np.log(np.sum(np.exp(logits), axis=-1, keepdims=True))
        used = np.arange(logits.shape[1])[None] < np.array(FRAMES)[:, None]
        return -np.sum(np.where(used, log_p[..., 0], 0), axis=1)

    simple_logits = y_pred["am"] + y_pred["lm"]  # lm [B, 1, C]
    np.testing.assert_allclose(parts["simple"], by_hand(simple_logits), rtol=1e-5)
    full_logits = model.full_logits(y_pred)[:, :, 0]
    np.testing.assert_allclose(parts["pruned"], by_hand(full_logits), rtol=1e-5)
