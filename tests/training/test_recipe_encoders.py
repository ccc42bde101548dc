# SPDX-License-Identifier: Apache-2.0
"""The recipe's model: the LSTM or Conformer encoder, and their bad arguments."""

import pytest

from tf_transducer.data.corpora import manifest
from tf_transducer.models import Transducer
from tf_transducer.training import transducer_recipe as recipe


def test_lstm_config_is_unchanged_and_conformer_takes_its_sizes():
    lstm = recipe.model_config(12, 20, encoder_units=16)
    assert "encoder" not in lstm and lstm["encoder_units"] == 16
    config = recipe.model_config(
        12, 20, encoder="conformer", conformer={"chunk_size": 4, "conformer_dim": 32}
    )
    assert config["encoder"] == "conformer"
    assert (config["chunk_size"], config["conformer_dim"]) == (4, 32)
    assert config["left_context"] == recipe.CONFORMER["left_context"]
    assert "encoder_units" not in config and "stack" not in config
    model = Transducer(**config)
    model.build()
    assert model.encoder.chunk_size == 4 and model.encoder.units == 32


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(encoder="gru"), "encoder must be one of"),
        (dict(conformer={"chunk_size": 4}), 'for encoder="conformer" only'),
        (dict(encoder="conformer", conformer=[4]), "conformer: a dict"),
        (
            dict(encoder="conformer", conformer={"chunk": 4}),
            r"unknown sizes \['chunk'\]",
        ),
    ],
)
def test_bad_encoder_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        recipe.model_config(12, 20, **kwargs)


@pytest.mark.parametrize("value", [-1, 3, 1.5, True])
def test_bad_lr_warmup_epochs_is_named(tmp_path, value):
    with pytest.raises(ValueError, match="lr_warmup_epochs must be an int in"):
        recipe.train([manifest("digits_dev")], str(tmp_path), epochs=3,
                     lr_warmup_epochs=value)  # fmt: skip
    assert not any(tmp_path.iterdir())  # nothing written
