# SPDX-License-Identifier: Apache-2.0
"""The DeepSpeech recipe's run configuration, as the transducer's (`config`).

    from tf_transducer.training.deepspeech_config import (
        DeepSpeechDataConfig, DeepSpeechModelConfig, DeepSpeechRunConfig)

    config = DeepSpeechRunConfig(
        model=DeepSpeechModelConfig(n_hidden=256, sample_rate=8000),
        data=DeepSpeechDataConfig(train_files=("train.csv",)),
    )
    deepspeech_recipe.train(config, "runs/ds")

The settings and their flags are DeepSpeech 0.9's (`--n_hidden`,
`--train_batch_size`, `--es_epochs`, ...); run.json files of 0.1 (no
"kind") are read too.
"""

import dataclasses
from collections.abc import Mapping
from typing import Any

from tf_transducer.training.config import _spec_augment
from tf_transducer.training.config import check_spec_augment
from tf_transducer.training.config_base import RootConfig
from tf_transducer.training.config_base import Section
from tf_transducer.training.config_base import a_float
from tf_transducer.training.config_base import batch_size_setting
from tf_transducer.training.config_base import boolean
from tf_transducer.training.config_base import epochs_setting
from tf_transducer.training.config_base import files_setting
from tf_transducer.training.config_base import non_negative_float
from tf_transducer.training.config_base import non_negative_int
from tf_transducer.training.config_base import positive_float
from tf_transducer.training.config_base import positive_int
from tf_transducer.training.config_base import seed_setting
from tf_transducer.training.config_base import setting
from tf_transducer.training.config_base import skip_bad_setting

ENGLISH = " abcdefghijklmnopqrstuvwxyz'"
SPEC_AUGMENT = ("none", "LB", "LD", "SM", "SS")


def _augment(name: str, value: Any) -> Any:
    """A SpecAugment policy name, "none", or SpecAugment's arguments (names checked)."""
    if value is None or value in SPEC_AUGMENT:
        return "none" if value is None else value
    if not isinstance(value, Mapping):
        raise ValueError(
            f"{name} must be one of {list(SPEC_AUGMENT)} or a dict of SpecAugment "
            f"arguments, got {value!r}"
        )
    return _spec_augment(name, value)


def _characters(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value or len(set(value)) != len(value):
        raise ValueError(
            f"{name} must be a string of distinct characters, got {value!r}"
        )
    return value


def _rate(name: str, value: Any) -> float:
    """A dropout rate in [0, 1), or a negative number: dropout_rate's."""
    value = a_float(name, value)
    if value >= 1:
        raise ValueError(
            f"{name} must lie in [0, 1) (or be < 0: dropout_rate's), got {value}"
        )
    return value


_DROPOUT_HELP = "Dropout {} (-1: --dropout_rate)."


@dataclasses.dataclass(frozen=True)
class DeepSpeechModelConfig(Section):
    """`tf_transducer.models.DeepSpeech`'s arguments (num_classes: the alphabet's)."""

    SECTION = "model"
    n_hidden: int = setting(
        2048,
        positive_int,
        kind="integer",
        help="Width of the hidden layers and the LSTM.",
    )
    n_context: int = setting(
        9, non_negative_int, kind="integer", help="Context frames on each side."
    )
    relu_clip: float = setting(
        20.0, positive_float, kind="float", help="Ceiling of the clipped ReLUs."
    )
    dropout_rate: float = setting(
        0.05, _rate, kind="float", help="Dropout of layer 1 (and of others at -1)."
    )
    dropout_rate2: float = setting(
        -1.0, _rate, kind="float", help=_DROPOUT_HELP.format(2)
    )
    dropout_rate3: float = setting(
        -1.0, _rate, kind="float", help=_DROPOUT_HELP.format(3)
    )
    dropout_rate4: float = setting(
        -1.0, _rate, kind="float", help=_DROPOUT_HELP.format(4)
    )
    dropout_rate5: float = setting(
        -1.0, _rate, kind="float", help=_DROPOUT_HELP.format(5)
    )
    dropout_rate6: float = setting(
        -1.0, _rate, kind="float", help=_DROPOUT_HELP.format(6)
    )
    sample_rate: int = setting(
        16000, positive_int, flag="audio_sample_rate", kind="integer",
        help="Sample rate of the model's audio.",
    )  # fmt: skip
    feature_win_len: float = setting(
        32.0, positive_float, kind="float", help="MFCC window, ms."
    )
    feature_win_step: float = setting(
        20.0, positive_float, kind="float", help="MFCC step, ms."
    )
    augment: Any = setting(
        "none", _augment, kind="enum", choices=SPEC_AUGMENT,
        help="SpecAugment policy.",
    )  # fmt: skip

    def keras_arguments(self, num_classes: int) -> dict[str, Any]:
        """DeepSpeech(**this) keyword arguments."""
        arguments = self.to_dict()
        arguments["augment"] = None if self.augment == "none" else self.augment
        return dict(arguments, num_classes=num_classes)


@dataclasses.dataclass(frozen=True)
class DeepSpeechDataConfig(Section):
    """What is trained on, and the alphabet."""

    SECTION = "data"
    train_files: tuple[str, ...] = files_setting("training manifests (.csv / .jsonl)")
    dev_files: tuple[str, ...] = files_setting("validation manifests")
    # The alphabet's characters (the command line reads them from
    # --alphabet_config_path, a DeepSpeech alphabet file).
    alphabet: str = setting(ENGLISH, _characters)
    skip_bad: bool = skip_bad_setting()


@dataclasses.dataclass(frozen=True)
class AdamConfig(Section):
    """Adam's settings (a constant learning rate, as DeepSpeech's)."""

    SECTION = "optimizer"
    learning_rate: float = setting(
        0.001, positive_float, kind="float", help="Adam's learning rate."
    )
    beta1: float = setting(0.9, non_negative_float, kind="float", help="Adam's beta 1.")
    beta2: float = setting(
        0.999, non_negative_float, kind="float", help="Adam's beta 2."
    )
    epsilon: float = setting(1e-8, positive_float, kind="float", help="Adam's epsilon.")


@dataclasses.dataclass(frozen=True)
class DeepSpeechTrainingConfig(Section):
    """Epochs, batches, seed and early stopping."""

    SECTION = "training"
    epochs: int = epochs_setting(75)
    batch_size: int = batch_size_setting(16, "Training batch size.")
    dev_batch_size: int = setting(
        16, positive_int, kind="integer", help="Validation batch size."
    )
    steps_per_epoch: int = setting(
        0, non_negative_int, flag="train_steps_per_epoch", kind="integer",
        help="Batches per epoch (0: the whole set).",
    )  # fmt: skip
    seed: int = seed_setting(4568, "Seed of weights, shuffling and dropout.")
    early_stop: bool = setting(
        True, boolean, kind="bool",
        help="Stop when the validation loss stops improving.",
    )  # fmt: skip
    es_epochs: int = setting(
        25, positive_int, kind="integer", help="Early-stopping patience, epochs."
    )
    es_min_delta: float = setting(
        0.05, non_negative_float, kind="float",
        help="Smallest validation-loss improvement.",
    )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class DeepSpeechRunConfig(RootConfig):
    """A DeepSpeech training run: model, data, optimizer, training."""

    KIND = "deepspeech"
    model: DeepSpeechModelConfig = dataclasses.field(
        default_factory=DeepSpeechModelConfig
    )
    data: DeepSpeechDataConfig = dataclasses.field(default_factory=DeepSpeechDataConfig)
    optimizer: AdamConfig = dataclasses.field(default_factory=AdamConfig)
    training: DeepSpeechTrainingConfig = dataclasses.field(
        default_factory=DeepSpeechTrainingConfig
    )

    def check(self) -> None:
        """The values that only building the layers checks (named); see RunConfig."""
        check_spec_augment("model.augment", self.model.augment)

    LEGACY_SECTIONS = ("model", "alphabet", "data", "training")

    @classmethod
    def _from_legacy(cls, values: Mapping[str, Any]) -> "DeepSpeechRunConfig":
        """A 0.1 DeepSpeech run.json's configuration (DeepSpeech's flag names)."""
        model = {k: v for k, v in values["model"].items() if k != "num_classes"}
        if model.get("augment") is None:
            model["augment"] = "none"
        t, data = values["training"], values["data"]
        names = dict(batch_size="train_batch_size", steps_per_epoch=(
            "train_steps_per_epoch"), seed="random_seed")  # fmt: skip
        training = {k: t[names.get(k, k)] for k in (
            "epochs", "batch_size", "steps_per_epoch", "seed", "early_stop",
            "es_epochs", "es_min_delta")}  # fmt: skip
        return cls(
            model=DeepSpeechModelConfig(**model),
            data=DeepSpeechDataConfig(
                train_files=data["train_files"],
                dev_files=data["dev_files"],
                alphabet=values["alphabet"]["characters"],
            ),
            optimizer=AdamConfig(
                **{k: t[k] for k in ("learning_rate", "beta1", "beta2", "epsilon")}
            ),  # fmt: skip
            training=DeepSpeechTrainingConfig(**training),
        )
