# SPDX-License-Identifier: Apache-2.0
"""The command lines' configurations: flags made from the fields, --config, --set.

In process (absl's flags parsed here, reset after each test): what a train
command would train, without training.
"""

import dataclasses
import inspect
import json

import pytest
from absl import flags

from tf_transducer.cli import deepspeech as ds_cli
from tf_transducer.cli import transducer as cli
from tf_transducer.cli._common import CliError
from tf_transducer.data.corpora import manifest
from tf_transducer.models import presets
from tf_transducer.training.config import RunConfig
from tf_transducer.training.config_base import flag_fields
from tf_transducer.training.config_base import flag_name
from tf_transducer.training.deepspeech_config import DeepSpeechRunConfig

FLAGS = flags.FLAGS
TRAIN = manifest("digits_dev")


@pytest.fixture(autouse=True)
def fresh_flags():
    FLAGS.unparse_flags()
    yield
    FLAGS.unparse_flags()


def parse(*args):
    FLAGS(["prog", *args])


def test_every_setting_with_a_flag_has_it_with_its_default_and_help():
    names = {
        root: {flag_name(f) for _, f in flag_fields(root)}
        for root in (RunConfig, DeepSpeechRunConfig)
    }
    shared = names[RunConfig] & names[DeepSpeechRunConfig]  # one flag, two defaults
    for root in (RunConfig, DeepSpeechRunConfig):
        for qualified, field in flag_fields(root):
            flag = FLAGS[flag_name(field)]
            own = flag.help.endswith(field.metadata["help"])  # (enums: "<a|b>: ...")
            assert own or flag_name(field) in shared, qualified
            if field.metadata["kind"] != "list" and flag_name(field) not in shared:
                assert flag.default == field.default, qualified


def test_the_model_shorthands_name_real_arguments():
    part_classes = {"predictor": "PredictionNetwork", "joiner": "TransducerJoiner"}
    for name, (part, argument, cls, _, _, _) in cli.MODEL_FLAGS.items():
        layer = presets.PART_CLASSES[cls or part_classes[part]]
        assert argument in inspect.signature(layer.__init__).parameters, name


def test_flags_become_the_configuration():
    parse(f"--train_files={TRAIN}", "--train_batch_size=8", "--epochs=3",
          "--audio_sample_rate=8000", "--loss=fused",
          "--transducer_augment=none")  # fmt: skip
    config = cli.run_config()
    assert config.data.train_files == (TRAIN,)
    assert (config.training.batch_size, config.training.epochs) == (8, 3)
    assert (config.features.sample_rate, config.training.loss) == (8000, "fused")
    assert config.augment.spec_augment == "none"
    assert config.model == RunConfig().model  # lstm-1m, as before


def test_encoder_flags_keep_their_0_1_meaning():
    parse(f"--train_files={TRAIN}", "--encoder=conformer", "--conformer_dim=32",
          "--chunk_sizes=1,2", "--subsampling=2", "--predictor=lstm")  # fmt: skip
    model = cli.run_config().model
    assert model.preset == "conformer-2m"
    assert model.encoder == {"d_model": 32, "chunk_sizes": [1, 2], "subsampling": 2}
    assert model.predictor["units"] == 128 and model.predictor["kind"] == "lstm"
    assert model.joiner["units"] == 128


def test_config_file_then_flags_then_set(tmp_path):
    path = tmp_path / "run.json"
    RunConfig().with_overrides(["training.epochs=7", "training.batch_size=4"]).to_json(
        str(path)
    )
    parse(f"--config={path}", f"--train_files={TRAIN}", "--train_batch_size=5",
          "--set", "training.batch_size=6",
          "--set", "model.encoder.units=64")  # fmt: skip
    config = cli.run_config()
    assert config.training.epochs == 7  # the file's
    assert config.training.batch_size == 6  # --set over the flag
    assert config.model.encoder == {"units": 64}


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "--train_files is needed"),
        ([f"--train_files={TRAIN}", "--train_batch_size=0"],
         "--train_batch_size must be a positive int, got 0"),
        ([f"--train_files={TRAIN}", "--lr_warmup_epochs=60"],
         r"--lr_warmup_epochs must be below --epochs \(50\)"),
        ([f"--train_files={TRAIN}", "--model=big"], "--model must be one of"),
        ([f"--train_files={TRAIN}", "--conformer_dim=32"],
         "--conformer_dim is for --encoder conformer"),
        ([f"--train_files={TRAIN}", "--model=lstm-1m", "--encoder=lstm"],
         "give --model or --encoder"),
        ([f"--train_files={TRAIN}", "--set", "training.batchsize=3"],
         r"--set: training: unknown settings \['batchsize'\]"),
        ([f"--train_files={TRAIN}", "--set", "epochs=3"],
         "--set 'epochs=3': expected section.setting=value"),
        (["--train_files=/no/such.csv"], "--train_files: manifest or corpus"),
        (["--config=/no/such.json"], "--config: .*cannot read the configuration"),
        ([f"--train_files={TRAIN}", "--transducer_augment=XX"],
         "--transducer_augment: .*SpecAugment preset"),
    ],
)  # fmt: skip
def test_bad_flags_are_named(args, message):
    parse(*args)
    with pytest.raises(CliError, match=message):
        cli.run_config()


def test_a_0_1_run_json_is_a_config(tmp_path):
    import os

    old = os.path.join(os.path.dirname(__file__), "..", "training", "data")
    with open(os.path.join(old, "run_v0_lstm.json")) as f:
        saved = json.load(f)
    saved["config"]["data"]["train_files"] = [TRAIN]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(saved))
    parse(f"--config={path}", "--epochs=2")
    config = cli.run_config()
    assert config.training.epochs == 2
    assert config.model.encoder["units"] == 16


def test_deepspeech_flags_become_its_configuration(tmp_path):
    alphabet = tmp_path / "alphabet.txt"
    alphabet.write_text("\n".join(" abc") + "\n")
    parse(f"--train_files={TRAIN}", "--n_hidden=64", "--train_batch_size=4",
          "--dropout_rate2=0.2", "--augment=LD", f"--alphabet_config_path={alphabet}",
          "--set", "training.es_epochs=3")  # fmt: skip
    config = ds_cli.run_config()
    assert isinstance(config, DeepSpeechRunConfig)
    assert (config.model.n_hidden, config.model.dropout_rate2) == (64, 0.2)
    assert (config.training.batch_size, config.training.es_epochs) == (4, 3)
    assert config.model.augment == "LD" and config.data.alphabet == " abc"
    assert config.training.epochs == 75  # DeepSpeech's default, not the transducer's
    parse(f"--train_files={TRAIN}", "--n_hidden=0")
    with pytest.raises(CliError, match="--n_hidden must be a positive int"):
        ds_cli.run_config()


def test_sections_keep_their_order_in_help():
    from tf_transducer.cli import help_text

    text = help_text("tf_transducer.cli.transducer", cli.__doc__)
    for name in ("--model", "--train_batch_size", "--config", "--set", "--encoder"):
        assert f"  {name}:" in text
    fields = [f.name for f in dataclasses.fields(RunConfig)]
    assert fields[0] == "model"
