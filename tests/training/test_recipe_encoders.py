# SPDX-License-Identifier: Apache-2.0
"""The recipe's model from its configuration: the LSTM or Conformer presets."""

import pytest

from tf_transducer.data.corpora import manifest
from tf_transducer.layers import ConformerEncoder
from tf_transducer.layers import TransducerEncoder
from tf_transducer.models import PRESETS
from tf_transducer.training import transducer_recipe as recipe
from tf_transducer.training.config import DataConfig
from tf_transducer.training.config import FeaturesConfig
from tf_transducer.training.config import ModelConfig
from tf_transducer.training.config import OptimizerConfig
from tf_transducer.training.config import RunConfig
from tf_transducer.training.config import TrainingConfig


def test_the_default_model_is_lstm_1m_and_presets_take_overrides():
    model = recipe.build_model(RunConfig(features=FeaturesConfig(n_mels=20)), 12)
    assert isinstance(model.encoder, TransducerEncoder)
    assert (model.encoder.units, model.encoder.stack) == (256, 3)
    assert (model.predictor.kind, model.predictor.units) == ("stateless", 128)
    assert model.feature_dim == 20 and model.normalizer is not None
    lstm = PRESETS["lstm-1m"]
    config = RunConfig(
        model=ModelConfig(
            "conformer-2m",
            encoder={"chunk_size": 4, "d_model": 32},
            predictor=lstm["predictor"],
            joiner=lstm["joiner"],
        ),
        features=FeaturesConfig(n_mels=20),
    )
    model = recipe.build_model(config, 12, steps_per_epoch=7)
    assert isinstance(model.encoder, ConformerEncoder)
    assert (model.encoder.chunk_size, model.encoder.units) == (4, 32)
    assert (
        model.encoder.left_context == PRESETS["conformer-2m"]["encoder"]["left_context"]
    )
    assert (model.predictor.kind, model.joiner.units) == ("stateless", 128)
    # SpecAugment ("default") starts after the clean warm-up epochs.
    assert model.spec_augment.start_step == 7 * config.augment.warmup_epochs


@pytest.mark.parametrize(
    "model, message",
    [
        (dict(preset="gru"), "model.preset must be one of"),
        (dict(encoder=[4]), "model.encoder must be a dict of settings"),
        (dict(encoder={"chunk": 4}), r"model.encoder \(TransducerEncoder\): .*chunk"),
        (dict(preset=None), "model.encoder: without a preset, a whole part"),
    ],
)
def test_bad_model_settings_are_named(model, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(**model)


@pytest.mark.parametrize("value", [-1, 3, 1.5, True])
def test_bad_lr_warmup_epochs_is_named(tmp_path, value):
    with pytest.raises(ValueError, match="lr_warmup_epochs"):
        recipe.train(
            RunConfig(
                data=DataConfig(train_files=(manifest("digits_dev"),)),
                optimizer=OptimizerConfig(lr_warmup_epochs=value),
                training=TrainingConfig(epochs=3),
            ),
            str(tmp_path),
        )
    assert not any(tmp_path.iterdir())  # nothing written


def test_train_takes_a_run_config_and_train_files(tmp_path):
    with pytest.raises(ValueError, match="config must be a .*RunConfig"):
        recipe.train({"data": {}}, str(tmp_path))
    with pytest.raises(ValueError, match="data.train_files: give at least one"):
        recipe.train(RunConfig(), str(tmp_path))
    missing = RunConfig(data=DataConfig(train_files=(str(tmp_path / "no.csv"),)))
    with pytest.raises(FileNotFoundError, match="data.train_files: manifest or corpus"):
        recipe.train(missing, str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()
