# SPDX-License-Identifier: Apache-2.0
"""Transducer as a composition: parts, presets, its config, 0.1's layout, contract."""

import os
import re
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from tf_transducer.layers import PredictionNetwork
from tf_transducer.layers import TransducerEncoder
from tf_transducer.layers import TransducerJoiner
from tf_transducer.layers.streaming import StreamingEncoder
from tf_transducer.layers.streaming import check_streaming_encoder
from tf_transducer.models import CONFORMER_PRESETS
from tf_transducer.models import PRESETS
from tf_transducer.models import Transducer
from tf_transducer.models import presets
from tf_transducer.models.legacy import legacy_parts

DATA = os.path.join(os.path.dirname(__file__), "data")
V, F = 7, 6


def test_parts_layers_and_configurations_build_the_same_model():
    keras.utils.set_random_seed(1)
    layers = Transducer(
        V, TransducerEncoder(8, 1, 2), PredictionNetwork(V, 4, 8),
        TransducerJoiner(V, 8), feature_dim=F,
    )  # fmt: skip
    keras.utils.set_random_seed(1)
    configs = Transducer(
        V,
        dict(class_name="TransducerEncoder", units=8, num_layers=1, stack=2),
        dict(class_name="PredictionNetwork", embedding_dim=4, units=8),
        dict(class_name="TransducerJoiner", units=8),
        feature_dim=F,
    )
    for model in (layers, configs):
        model.build()
    x = np.random.default_rng(0).normal(size=(2, 9, F)).astype(np.float32)
    lengths = np.array([9, 4], np.int32)
    a = layers((x, lengths))["encoder"]
    b = configs((x, lengths))["encoder"]
    np.testing.assert_array_equal(a, b)
    assert presets.part_config(layers.encoder) == presets.part_config(configs.encoder)


def test_from_preset_applies_overrides_and_the_docs_counts():
    model = Transducer.from_preset(
        "lstm-1m", 256, encoder={"units": 64, "stack": 4}, feature_dim=80
    )
    assert (model.encoder.units, model.encoder.stack) == (64, 4)
    assert model.predictor.kind == "stateless"
    full = Transducer.from_preset("lstm-1m", 256, feature_dim=80)
    full.build()
    assert f"{full.count_params():,}" in re.sub(r"\s+", " ", presets.__doc__)
    with pytest.raises(ValueError, match="preset must be one of"):
        Transducer.from_preset("lstm-2m", 256)
    with pytest.raises(ValueError, match="encoder must be a dict of TransducerEncoder"):
        Transducer.from_preset("lstm-1m", 256, encoder=[64])


def test_get_config_round_trips_and_saves(tmp_path):
    model = Transducer.from_preset(
        "conformer-2m", V, encoder={"num_layers": 1, "d_model": 16, "num_heads": 2},
        feature_dim=F, normalization="global", augment="SM",
    )  # fmt: skip
    model.build()
    config = model.get_config()
    assert config["normalization"] == "global" and config["augment"] == "SM"
    again = Transducer.from_config(config)
    assert again.get_config() == config
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    x = np.ones([1, 8, F], np.float32)
    np.testing.assert_array_equal(
        loaded(x, training=False)["encoder"], model(x, training=False)["encoder"]
    )


@pytest.mark.parametrize("name", ["lstm", "conformer"])
def test_a_0_1_keras_file_loads_with_its_weights(name):
    # Saved by the 0.1 layout (flat arguments) with outputs recorded then.
    want = np.load(os.path.join(DATA, "transducer_v0_outputs.npz"))
    model = keras.models.load_model(os.path.join(DATA, f"transducer_v0_{name}.keras"))
    features, lengths = want[f"{name}_features"], want[f"{name}_lengths"]
    got = model((features, lengths), training=False)["encoder"]
    np.testing.assert_allclose(got, want[f"{name}_encoder"], atol=1e-6)
    decoded = model.predictor(tf.constant([[0, 1, 2]]))
    logits = model.joiner(model.encoder(features, lengths)[0], decoded)
    np.testing.assert_allclose(logits, want[f"{name}_logits"], atol=1e-5)
    assert model.get_config()["encoder"]["class_name"] in (
        "TransducerEncoder",
        "ConformerEncoder",
    )


def test_flat_arguments_still_build_the_same_model_with_a_warning():
    keras.utils.set_random_seed(2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = Transducer(V, feature_dim=F, encoder_units=8, stack=2, joiner_units=8)
    assert any("flat keyword arguments" in str(w.message) for w in caught)
    keras.utils.set_random_seed(2)
    new = Transducer(
        V, TransducerEncoder(8, stack=2), PredictionNetwork(V), TransducerJoiner(V, 8),
        feature_dim=F,
    )  # fmt: skip
    assert presets.part_config(old.encoder) == presets.part_config(new.encoder)
    assert presets.part_config(old.predictor) == presets.part_config(new.predictor)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        conformer = Transducer(256, feature_dim=80, **CONFORMER_PRESETS["conformer-2m"])
    assert presets.part_config(conformer.encoder) == presets.part_config(
        Transducer.from_preset("conformer-2m", 256).encoder
    )
    with pytest.raises(ValueError, match='encoder must be "lstm" or "conformer"'):
        legacy_parts({"encoder": "gru"})


class _Halving(keras.layers.Layer):
    """A toy streaming encoder: every 2nd frame, scaled; no state."""

    units, subsampling, default_chunk_frames, left_context = F, 2, 4, 0

    def call(self, features, lengths=None, training=None):
        lengths = tf.fill(tf.shape(features)[:1], tf.shape(features)[1])
        return 0.5 * features[:, ::2], (lengths + 1) // 2

    def compute_output_shape(self, shape, lengths_shape=None):
        return (shape[0], None, F), (shape[0],)

    def initial_state(self, batch):
        return []

    def step(self, features, states, lengths=None):
        return 0.5 * features[:, ::2], []


def test_any_layer_keeping_the_contract_is_an_encoder():
    encoder = _Halving()
    assert isinstance(encoder, StreamingEncoder)
    check_streaming_encoder(encoder)
    model = Transducer(V, encoder, PredictionNetwork(V, 4, 8), TransducerJoiner(V, 8),
                       feature_dim=F)  # fmt: skip
    model.build()
    x = np.random.default_rng(3).normal(size=(1, 8, F)).astype(np.float32)
    streamed, lengths = model.stream_encode(x)
    encoded, _ = model.encode(x)
    np.testing.assert_allclose(streamed, encoded)
    assert list(lengths.numpy()) == [4]


def test_a_broken_contract_is_named():
    class NoChunks(_Halving):
        default_chunk_frames = 3

    with pytest.raises(ValueError, match="default_chunk_frames .* multiple of"):
        check_streaming_encoder(NoChunks())
    with pytest.raises(ValueError, match="lacks .*initial_state"):
        check_streaming_encoder(keras.layers.Dense(3))


def test_presets_are_listed_with_their_parts():
    assert set(PRESETS) == {"lstm-1m", "conformer-2m", "conformer-10m"}
    for parts in PRESETS.values():
        assert set(parts) == {"encoder", "predictor", "joiner"}
        assert parts["encoder"]["class_name"] in presets.PART_CLASSES
