# SPDX-License-Identifier: Apache-2.0
"""Transducer with a ConformerEncoder: config, save/load, fit with every loss,
offline and streamed decoding, the presets, bad arguments."""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_transducer.decoding.transducer import KerasSteps
from tf_transducer.decoding.transducer import greedy_search
from tf_transducer.decoding.transducer import modified_beam_search
from tf_transducer.decoding.transducer import transducer_beam_search
from tf_transducer.decoding.transducer import transducer_greedy_decode
from tf_transducer.layers import ConformerEncoder
from tf_transducer.layers import PredictionNetwork
from tf_transducer.layers import TransducerEncoder
from tf_transducer.layers import TransducerJoiner
from tf_transducer.losses import FusedRnntLoss
from tf_transducer.losses import PrunedRnntLoss
from tf_transducer.losses import RnntLoss
from tf_transducer.models import PRESETS
from tf_transducer.models import Transducer

V, F = 8, 6
RNG = np.random.default_rng(36)
FEATURES = RNG.normal(size=(2, 27, F)).astype(np.float32)
LENGTHS = np.array([27, 14], np.int32)
LABELS = np.array([[1, 2, 3, 4], [5, 6, -1, -1]], np.int32)


def tiny(**encoder):
    keras.utils.set_random_seed(5)
    sizes = dict(
        d_model=16, num_layers=2, num_heads=2, conv_kernel=3, subsampling=2,
        chunk_size=3, left_context=4, dropout=0.0,
    )  # fmt: skip
    model = Transducer(
        V,
        ConformerEncoder(**{**sizes, **encoder}),
        PredictionNetwork(V, embedding_dim=8, units=16),
        TransducerJoiner(V, units=16),
        feature_dim=F,
    )
    model.build()
    return model


def test_config_round_trip_and_save_load(tmp_path):
    model = tiny(chunk_sizes=[1, 3], dropout=0.1)
    assert isinstance(model.encoder, ConformerEncoder)
    assert (model.encoder.units, model.encoder.subsampling) == (16, 2)
    config = model.get_config()
    assert config["encoder"]["class_name"] == "ConformerEncoder"
    assert config["encoder"]["config"]["chunk_sizes"] == [1, 3]
    again = Transducer.from_config(config)
    assert again.get_config() == config
    assert again.encoder.get_config()["chunk_size"] == 3
    want = model((FEATURES, LENGTHS), training=False)
    path = str(tmp_path / "conformer.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded.encoder, ConformerEncoder)
    got = loaded((FEATURES, LENGTHS), training=False)
    np.testing.assert_array_equal(got["lengths"], [14, 7])
    np.testing.assert_array_equal(got["encoder"], want["encoder"])


@pytest.mark.parametrize(
    "loss",
    [RnntLoss, FusedRnntLoss, lambda: PrunedRnntLoss(s_range=2)],
    ids=["full", "fused", "pruned"],
)
def test_fits_with_every_transducer_loss(loss):
    model = tiny(chunk_sizes=[1, 2, 3])
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss=loss())
    before = [np.asarray(v) for v in model.encoder.trainable_variables]
    history = model.fit((FEATURES, LENGTHS), LABELS, batch_size=2, epochs=3, verbose=0)
    losses = history.history["loss"]
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]
    after = [np.asarray(v) for v in model.encoder.trainable_variables]
    assert all(not np.array_equal(a, b) for a, b in zip(before, after, strict=True))


def test_streamed_encoder_equals_offline_and_decodes_the_same():
    model = tiny()
    encoded, lengths = model.encode((FEATURES, LENGTHS), training=False)
    streamed, stream_lengths = model.stream_encode((FEATURES, LENGTHS))
    np.testing.assert_array_equal(stream_lengths, [14, 7])
    np.testing.assert_allclose(streamed, encoded, atol=1e-5)
    # Chunks of 2 encoder frames equal the offline call with chunk_size=2.
    two, _ = model.encoder(*model.features((FEATURES, LENGTHS)), chunk_size=2)
    np.testing.assert_allclose(
        model.stream_encode((FEATURES, LENGTHS), chunk_frames=4)[0], two, atol=1e-5
    )
    offline = transducer_greedy_decode(model, (FEATURES, LENGTHS))
    projected = np.asarray(model.joiner.project_encoder(streamed))
    online, _ = greedy_search(projected, stream_lengths, KerasSteps(model))
    assert online == offline and all(offline)
    beams = transducer_beam_search(model, (FEATURES, LENGTHS), beam=3)
    for b, n in enumerate(np.asarray(stream_lengths)):
        labels, score = modified_beam_search(projected[b, :n], KerasSteps(model), 3)
        assert labels == beams[b] and np.isfinite(score)
    standard = transducer_beam_search(model, (FEATURES, LENGTHS), 3, "standard")
    assert len(standard) == 2


def test_lstm_encoder_streams_as_offline():
    keras.utils.set_random_seed(2)
    model = Transducer(
        V,
        TransducerEncoder(units=8, stack=3),
        PredictionNetwork(V),
        TransducerJoiner(V, units=8),
        feature_dim=F,
    )
    encoded, lengths = model.encode((FEATURES, LENGTHS), training=False)
    streamed, stream_lengths = model.stream_encode((FEATURES, LENGTHS), 6)
    np.testing.assert_array_equal(stream_lengths, lengths)
    valid = (
        np.arange(encoded.shape[1])[None, :, None] < np.asarray(lengths)[:, None, None]
    )
    np.testing.assert_allclose(streamed, np.where(valid, encoded, 0.0), atol=1e-5)


@pytest.mark.parametrize(("name", "target"), [("conformer-2m", 2e6),
                                               ("conformer-10m", 1e7)])  # fmt: skip
def test_presets_have_their_parameter_counts(name, target):
    from tf_transducer.models import presets

    model = Transducer.from_preset(name, 256, feature_dim=80)
    model.build()
    count = model.count_params()
    assert 0.75 * target <= count <= 1.25 * target
    assert f"{count:,}" in re.sub(r"\s+", " ", presets.__doc__)
    assert type(model.encoder).__name__ == PRESETS[name]["encoder"]["class_name"]


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        (dict(d_model=0), "d_model"),
        (dict(num_layers=0), "num_layers"),
        (dict(num_heads=3), "num_heads"),
        (dict(conv_kernel=1), "conv_kernel"),
        (dict(dropout=1.5), "dropout"),
        (dict(subsampling=3), "subsampling"),
        (dict(chunk_size=0), "chunk_size"),
        (dict(left_context=-1), "left_context"),
        (dict(chunk_sizes=[2, 0]), "chunk_sizes"),
    ],
)
def test_bad_arguments_are_named(kwargs, name):
    with pytest.raises(ValueError, match=name):
        tiny(**kwargs)


@pytest.mark.parametrize(
    ("parts", "name"),
    [
        (dict(encoder="transformer"), "encoder"),
        (dict(encoder=None), "encoder is needed"),
        (dict(encoder=keras.layers.Dense(4)), "encoder must be a streaming encoder"),
        (dict(predictor=PredictionNetwork(V + 1)), "predictor has vocab_size"),
        (dict(joiner=TransducerJoiner(V - 1)), "joiner has vocab_size"),
        (dict(encoder={"class_name": "Nope"}), "encoder: unknown layer class"),
        (dict(encoder={"class_name": "ConformerEncoder", "width": 3}), "width"),
    ],
)
def test_bad_parts_are_named(parts, name):
    args = dict(
        encoder=ConformerEncoder(16, 1, 2, subsampling=2),
        predictor=PredictionNetwork(V, 8, 16),
        joiner=TransducerJoiner(V, 16),
    )
    with pytest.raises(ValueError, match=name):
        Transducer(V, **{**args, **parts}, feature_dim=F)


@pytest.mark.parametrize("chunk_frames", [0, 3, 4.0, True])
def test_bad_stream_chunks_are_named(chunk_frames):
    with pytest.raises(ValueError, match="chunk_frames"):
        tiny().stream_encode((FEATURES, LENGTHS), chunk_frames)


def test_stream_lengths_past_the_features_are_named():
    with pytest.raises(tf.errors.InvalidArgumentError, match="lengths must lie in"):
        tiny().stream_encode((FEATURES, LENGTHS + 28))
