# SPDX-License-Identifier: Apache-2.0
"""The demo's runs (`digits_config`): what run.json records of them."""

import pytest

from tf_transducer.training.config import RunConfig
from tf_transducer.training.digits_recipe import EPOCHS
from tf_transducer.training.digits_recipe import digits_config


@pytest.mark.parametrize("encoder", ["lstm", "conformer"])
def test_the_demo_runs_round_trip_through_run_json(encoder, tmp_path):
    config = digits_config(encoder, seed=3)
    path = str(tmp_path / "run.json")
    config.to_json(path)
    assert RunConfig.from_json(path) == config
    resolved = config.resolved()
    assert resolved.training.epochs == EPOCHS[encoder]
    assert resolved.training.seed == 3
    assert resolved.data.word_delimiter


def test_the_conformer_recipe_is_hybrid_with_batches_of_8():
    conformer = digits_config("conformer").resolved()
    assert conformer.model.parts()["encoder"]["class_name"] == "ConformerEncoder"
    assert (conformer.training.ctc_weight, conformer.training.batch_size) == (0.5, 8)
    lstm = digits_config("lstm").resolved()
    assert (lstm.training.ctc_weight, lstm.training.batch_size) == (0.0, 16)
    # The experiments' overrides go on top of it, checked as --set's are.
    before = digits_config("conformer").with_overrides(
        ["training.ctc_weight=0", "training.batch_size=16"]
    )
    assert (before.training.ctc_weight, before.training.batch_size) == (0.0, 16)
    with pytest.raises(ValueError, match="training.ctc_weight"):
        digits_config("conformer").with_overrides(["training.ctc_weight=-1"])


def test_an_unknown_encoder_is_named():
    with pytest.raises(ValueError, match="encoder must be one of"):
        digits_config("gru")
