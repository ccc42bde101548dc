# SPDX-License-Identifier: Apache-2.0
"""The transducer recipe's waveform augmentation setting."""

import json

import numpy as np
import pytest

from tf_transducer.data import WaveAugment
from tf_transducer.data.corpora import manifest
from tf_transducer.training import transducer_recipe as recipe
from tf_transducer.training.config import AugmentConfig
from tf_transducer.training.config import DataConfig
from tf_transducer.training.config import FeaturesConfig
from tf_transducer.training.config import ModelConfig
from tf_transducer.training.config import RunConfig
from tf_transducer.training.config import TrainingConfig

WAVE = dict(noise_prob=1.0, reverb_prob=0.5, pitch_prob=0.5, babble=True)


def test_default_and_none():
    config = recipe.wave_augment_config("default")
    assert config["babble"] is True and config["speeds"] == [0.9, 1.0, 1.1]
    assert "warmup_epochs" not in config  # a training setting now
    assert recipe.wave_augment_config("none") is None
    assert recipe.wave_augment_config(None) is None
    assert recipe.make_wave_augment(None, [], 8000, 0) is None


def test_the_augmenter_and_its_babble_come_from_the_training_manifests():
    config = recipe.wave_augment_config(dict(noise_prob=1.0, babble=True))
    wave = recipe.make_wave_augment(config, [manifest("digits_dev")], 8000, 0)
    assert isinstance(wave, WaveAugment) and wave.sample_rate == 8000
    assert wave.noise_prob == 1.0 and wave.babble.shape == (16, 32000)
    np.testing.assert_allclose(np.sqrt((wave.babble**2).mean(axis=1)), 1, rtol=1e-4)
    again = recipe.make_wave_augment(config, [manifest("digits_dev")], 8000, 0)
    np.testing.assert_array_equal(wave.babble, again.babble)
    plain = recipe.make_wave_augment(
        recipe.wave_augment_config(dict(babble=False)), [], 8000, 0
    )
    assert plain.babble is None


@pytest.mark.parametrize(
    "value, message",
    [
        ("loud", "wave_augment must be"),
        (dict(noise_prob=2.0), "noise_prob"),
        (dict(volume=3), "wave_augment: .*volume"),
        (dict(babble="yes"), "babble"),
        (dict(warmup_epochs=1), "wave_augment: .*warmup_epochs"),
    ],
)
def test_bad_settings_are_named(value, message):
    with pytest.raises(ValueError, match=message):
        recipe.wave_augment_config(value)


def test_training_with_augmentation_is_repeatable(tmp_path):
    config = RunConfig(
        model=ModelConfig(encoder={"units": 8}),
        features=FeaturesConfig(sample_rate=8000, n_mels=20),
        data=DataConfig(train_files=(manifest("digits_dev"),), text_encoder="words"),
        augment=AugmentConfig(wave_augment=WAVE, warmup_epochs=1),
        training=TrainingConfig(epochs=2),
    )
    runs = [
        recipe.train(config, str(tmp_path / name), verbose=0)[2] for name in ("a", "b")
    ]
    assert runs[0]["loss"] == runs[1]["loss"]  # epoch 2 augmented, the same
    with open(tmp_path / "a" / "run.json") as f:
        saved = json.load(f)["config"]
    assert saved["augment"]["warmup_epochs"] == 1
    assert saved["augment"]["wave_augment"]["noise_prob"] == 1.0
    model, encoder = recipe.load_checkpoint(str(tmp_path / "a"))
    data, _ = recipe.speech_data([manifest("digits_dev")], encoder, 8000, 20)
    steps = data.num_batches(16, "auto")  # one epoch
    assert steps > 1 and model.spec_augment.start_step == steps


@pytest.mark.parametrize("value", [-1, 2.5, True])
def test_bad_warmup_epochs_are_named(value):
    with pytest.raises(ValueError, match="augment.warmup_epochs must be an int >= 0"):
        AugmentConfig(warmup_epochs=value)


@pytest.mark.parametrize("value", ["loud", dict(noise_prob=2.0)])
def test_bad_wave_augment_settings_are_named(value):
    with pytest.raises(ValueError, match="augment.wave_augment: .*"):
        AugmentConfig(wave_augment=value)
