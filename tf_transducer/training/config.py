# SPDX-License-Identifier: Apache-2.0
"""The transducer recipe's run configuration: one tree, written as run.json.

    from tf_transducer.training.config import (
        DataConfig, ModelConfig, RunConfig, TrainingConfig)

    config = RunConfig(
        model=ModelConfig("conformer-2m", encoder={"chunk_size": 4}),
        data=DataConfig(train_files=("train.jsonl",), dev_files=("dev.jsonl",)),
        training=TrainingConfig(epochs=30, loss="fused"),
    )
    recipe.train(config, "runs/t")

Every setting is named and checked once, here (an error names it as
`training.batch_size`); the command line defines its flags from these
fields (`tf_transducer.cli.config_flags`) and takes `--config run.json` and
`--set training.batch_size=32`. `RunConfig.to_json()` / `from_json()` are
run.json's "config"; run.json files of 0.1 (no "kind") are read too.
"""

import dataclasses
import inspect
from collections.abc import Mapping
from typing import Any

from tf_transducer.training.config_base import RootConfig
from tf_transducer.training.config_base import Section
from tf_transducer.training.config_base import batch_size_setting
from tf_transducer.training.config_base import boolean
from tf_transducer.training.config_base import epochs_setting
from tf_transducer.training.config_base import files_setting
from tf_transducer.training.config_base import fraction
from tf_transducer.training.config_base import mapping
from tf_transducer.training.config_base import non_negative_float
from tf_transducer.training.config_base import non_negative_int
from tf_transducer.training.config_base import one_of
from tf_transducer.training.config_base import optional
from tf_transducer.training.config_base import positive_float
from tf_transducer.training.config_base import positive_int
from tf_transducer.training.config_base import seed_setting
from tf_transducer.training.config_base import setting
from tf_transducer.training.config_base import skip_bad_setting

TEXT_ENCODERS = ("chars", "words", "subwords")
# The `training.loss` setting: RnntLoss, FusedRnntLoss (the same loss, its
# logits never stored), PrunedRnntLoss, or for a joiner with durations TdtLoss
# or FusedTdtLoss (the same loss, its logits never stored).
LOSSES = ("full", "fused", "pruned", "tdt", "fused_tdt")
TDT_LOSSES = ("tdt", "fused_tdt")
# SpecAugment's "default" policy (augment.spec_augment).
AUGMENT_DEFAULT = dict(
    freq_mask_max_bins=10,
    freq_mask_count=2,
    time_mask_max_frames=20,
    time_mask_count=2,
    time_mask_max_ratio=0.2,
    freq_warp_max_bins=4,
    time_warp_max_frames=10,
    time_warp_max_ratio=0.1,
)
# Waveform augmentation of the training audio (augment.wave_augment
# "default"): `WaveAugment`'s parameters and "babble" (mix in babble made of
# 64 training utterances).
WAVE_AUGMENT_DEFAULT = dict(
    speeds=[0.9, 1.0, 1.1],
    pitch_prob=0.3,
    pitch_semitones=2.0,
    tempo_prob=0.2,
    tempo_range=[0.9, 1.1],
    reverb_prob=0.3,
    rt60_range=[0.1, 0.5],
    telephone_prob=0.2,
    noise_prob=0.5,
    snr_range=[8.0, 30.0],
    gain_db=10.0,
    dc_prob=0.2,
    dc_max=0.02,
    babble=True,
)
# Epochs trained on clean audio and features (no SpecAugment, no waveform
# augmentation) first: augmented from the first step, the demo's transducer
# stays on its blank-only plateau (SpecAugment: training loss 8.8 after 10
# epochs). With 4 clean epochs none of three seeds had left it when the
# waveform augmentation began, and one was still on it after 16 (loss
# 10.3); with 10, seeds 0 and 2 left it at epochs 7 and 9.
WARMUP_EPOCHS = 10


def _preset(name: str, value: Any) -> str | None:
    from tf_transducer.models.presets import PRESETS

    if value is not None and value not in PRESETS:
        raise ValueError(f"{name} must be one of {sorted(PRESETS)}, got {value!r}")
    return value


def _spec_augment(name: str, value: Any) -> Any:
    """The setting: "default", "none", a SpecAugment preset or its arguments.

    The names are checked here, the values by `check_spec_augment` (it
    builds the layer, which starts TensorFlow's runtime).
    """
    from tf_transducer.layers import SpecAugment
    from tf_transducer.layers.spec_augment import PRESETS

    if value in ("default", "none", None):
        return "none" if value is None else value
    if isinstance(value, str) and value in PRESETS:
        return value
    if not isinstance(value, Mapping):
        raise ValueError(
            f'{name}: "default", "none", a SpecAugment preset {sorted(PRESETS)} or '
            f"a dict of SpecAugment arguments, got {value!r}"
        )
    known = set(inspect.signature(SpecAugment.__init__).parameters) - {"self", "kwargs"}
    unknown = sorted(set(value) - known)
    if unknown:
        raise ValueError(f"{name}: unknown SpecAugment arguments {unknown}")
    return mapping(name, value)


def check_spec_augment(name: str, value: Any) -> None:
    """The values of a spec_augment setting, checked by building the layer."""
    from tf_transducer.layers import SpecAugment

    try:
        SpecAugment.from_arg(spec_augment_policy(value))
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name}: {error}") from None


def _wave_augment(name: str, value: Any) -> Any:
    """The setting: "default", "none" or WaveAugment arguments (with "babble")."""
    if value in ("default", "none", None):
        return "none" if value is None else value
    try:
        wave_augment_config(value)
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None
    return mapping(name, value)


def wave_augment_config(wave_augment: Any) -> dict[str, Any] | None:
    """The waveform augmentation's parameters (a dict, or None for none)."""
    from tf_transducer.data.augment import WaveAugment

    if wave_augment == "none" or wave_augment is None:
        return None
    if wave_augment == "default":
        wave_augment = WAVE_AUGMENT_DEFAULT
    if not isinstance(wave_augment, Mapping):
        raise ValueError(
            'wave_augment must be "default", "none" or a dict of WaveAugment '
            f"arguments, got {wave_augment!r}"
        )
    params = dict(wave_augment)
    babble = params.pop("babble", False)
    if not isinstance(babble, bool):
        raise ValueError(f"wave_augment: babble must be true or false, got {babble!r}")
    try:  # checks every argument
        config = WaveAugment(sample_rate=8000, **params).get_config()
    except TypeError as error:
        raise ValueError(f"wave_augment: {error}") from None
    del config["sample_rate"]
    return {**config, "babble": babble}


def spec_augment_policy(value: Any) -> Any:
    """The SpecAugment argument of a Transducer for augment.spec_augment."""
    if value == "default":
        return dict(AUGMENT_DEFAULT)
    return None if value == "none" else value


@dataclasses.dataclass(frozen=True)
class FeaturesConfig(Section):
    """The log-mel features (saved with the model)."""

    SECTION = "features"
    sample_rate: int = setting(
        16000, positive_int, flag="audio_sample_rate", kind="integer",
        help="train: sample rate of the model's audio (saved with it; later "
        "commands read it from the checkpoint).",
    )  # fmt: skip
    n_mels: int = setting(
        80,
        positive_int,
        kind="integer",
        help="train: log-mel bands (saved with the model).",
    )


@dataclasses.dataclass(frozen=True)
class DataConfig(Section):
    """What is trained on, and the text units."""

    SECTION = "data"
    train_files: tuple[str, ...] = files_setting(
        "training manifests or corpora (a LibriSpeech folder, a Common Voice "
        ".tsv, the .txt transcripts of a folder of audio files)"
    )
    dev_files: tuple[str, ...] = files_setting("validation manifests or corpora")
    text_encoder: str = setting(
        "chars", one_of(*TEXT_ENCODERS), kind="enum", choices=TEXT_ENCODERS,
        help="Units: chars, words or subwords (SentencePiece of vocab_size pieces).",
    )  # fmt: skip
    vocab_size: int = setting(
        256, positive_int, kind="integer", help="SentencePiece vocabulary (subwords)."
    )
    word_delimiter: bool = setting(
        False, boolean, kind="bool",
        help="train, words / subwords: a class between words (the model must "
        "mark each word boundary, which lets whole-word models hear repeated words).",
    )  # fmt: skip
    max_duration: float = setting(
        30.0, positive_float, kind="float", help="Longest utterance, seconds."
    )
    skip_bad: bool = skip_bad_setting()


@dataclasses.dataclass(frozen=True)
class ModelConfig(Section):
    """The model: a preset of `tf_transducer.models.PRESETS` and overrides.

    preset: "lstm-1m", "conformer-2m", "conformer-10m"; or None, and then
    encoder, predictor and joiner are whole part configurations
    ({"class_name": ..., **arguments}, as `part_config` writes them). With a
    preset they override some of its parts' arguments, e.g.
    encoder={"chunk_size": 4}.
    """

    SECTION = "model"
    preset: str | None = setting(
        "lstm-1m", _preset, flag="model", kind="string",
        help="The model preset: lstm-1m, conformer-2m, conformer-10m (override "
        "sizes with --set model.encoder.<argument>=<value>).",
    )  # fmt: skip
    encoder: dict[str, Any] = setting(factory=dict, check=mapping)
    predictor: dict[str, Any] = setting(factory=dict, check=mapping)
    joiner: dict[str, Any] = setting(factory=dict, check=mapping)

    def __post_init__(self) -> None:
        super().__post_init__()
        from tf_transducer.models.presets import check_arguments

        for part, spec in self._specs().items():
            try:
                check_arguments(part, spec)
            except ValueError as error:
                raise ValueError(f"model.{error}") from None

    def _specs(self) -> dict[str, dict[str, Any]]:
        """The three part configurations, the preset's merged with the overrides."""
        from tf_transducer.models.presets import PARTS
        from tf_transducer.models.presets import merged
        from tf_transducer.models.presets import preset_parts

        base = preset_parts(self.preset) if self.preset else {}
        specs = {}
        for part in PARTS:
            given = getattr(self, part)
            if self.preset is None and "class_name" not in given:
                raise ValueError(
                    f"model.{part}: without a preset, a whole part configuration "
                    f"{{'class_name': ..., <arguments>}} is needed, got {given!r}"
                )
            specs[part] = merged(base[part], given) if self.preset else given
        return specs

    def durations(self) -> tuple[int, ...] | None:
        """The joiner's durations (a Token-and-Duration Transducer), or None."""
        durations = self._specs()["joiner"].get("durations")
        return None if durations is None else tuple(durations)

    def parts(self) -> dict[str, dict[str, Any]]:
        """The three part configurations, each checked by building its layer.

        Building a layer starts TensorFlow's runtime (seed generators are
        variables), which a multi-worker strategy must be created before:
        construction checks names and types only, `parts` (called by
        `RunConfig.check` and the recipe, after the strategy) the values.
        """
        from tf_transducer.models.presets import build_part
        from tf_transducer.models.presets import part_config

        parts = {}
        for part, spec in self._specs().items():
            try:
                layer = build_part(part, spec, vocab_size=2)
            except ValueError as error:
                raise ValueError(f"model.{error}") from None
            parts[part] = part_config(layer)
        return parts

    def resolved(self) -> "ModelConfig":
        """The same model as whole part configurations (preset None)."""
        return ModelConfig(None, **self.parts())


@dataclasses.dataclass(frozen=True)
class AugmentConfig(Section):
    """SpecAugment and waveform augmentation, after clean warm-up epochs."""

    SECTION = "augment"
    spec_augment: Any = setting(
        "default", _spec_augment, flag="transducer_augment", kind="string",
        help="SpecAugment: default, none, LB, LD, SM, SS (or a dict of its "
        "arguments through --set / --config).",
    )  # fmt: skip
    wave_augment: Any = setting(
        "default", _wave_augment, kind="string",
        help="Waveform augmentation of the training audio (speed, pitch, tempo, "
        "reverberation, telephone band, noise, babble, gain, DC): default or "
        "none (or a dict of WaveAugment arguments through --set / --config).",
    )  # fmt: skip
    warmup_epochs: int = setting(
        WARMUP_EPOCHS, non_negative_int, kind="integer",
        help="First epochs trained on clean audio and features (no augmentation).",
    )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class OptimizerConfig(Section):
    """Adam (AdamW with weight_decay) on a cosine decay (after an optional rise)."""

    SECTION = "optimizer"
    learning_rate: float = setting(
        0.004, positive_float, kind="float",
        help="Peak Adam learning rate (cosine decay).",
    )  # fmt: skip
    lr_warmup_epochs: int = setting(
        0, non_negative_int, kind="integer",
        help="Epochs of a linear learning-rate rise before the decay (a "
        "Conformer wants a few).",
    )  # fmt: skip
    clipnorm: float = setting(
        5.0, positive_float, kind="float", help="Gradient norm clipping."
    )
    weight_decay: float = setting(
        0.0, non_negative_float, kind="float",
        help="Decoupled weight decay (AdamW) of the weights; 0: Adam.",
    )  # fmt: skip
    final_lr_fraction: float = setting(
        0.05, non_negative_float, kind=None,
        help="The decay's floor, as a fraction of learning_rate.",
    )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class TrainingConfig(Section):
    """Epochs, batches, loss and seed."""

    SECTION = "training"
    epochs: int = epochs_setting(50)
    batch_size: int = batch_size_setting(
        16, "Training batch size (global, over every replica)."
    )
    loss: str = setting(
        "full", one_of(*LOSSES), kind="enum", choices=LOSSES,
        help="RnntLoss (full), FusedRnntLoss (fused: the full loss without "
        "storing the joiner's logits, for large vocabularies), PrunedRnntLoss "
        "(pruned), or TdtLoss (tdt: a Token-and-Duration Transducer, whose "
        "joiner has model.joiner.durations, e.g. --durations 0,1,2,3,4) and "
        "FusedTdtLoss (fused_tdt: the same loss without storing its logits).",
    )  # fmt: skip
    pruned_range: int = setting(
        4, positive_int, kind=None, help="PrunedRnntLoss's s_range."
    )
    tdt_sigma: float = setting(
        0.0, non_negative_float, kind=None,
        help="TdtLoss's (and FusedTdtLoss's) sigma (logit under-normalisation).",
    )  # fmt: skip
    tdt_omega: float = setting(
        0.0, fraction, kind=None,
        help="TdtLoss's omega: the weight of the RNN-T loss mixed in, in [0, 1].",
    )  # fmt: skip
    ctc_weight: float = setting(
        0.0, non_negative_float, kind="float",
        help="A hybrid model: a CTC head on the encoder trained with this weight "
        "(loss = transducer + ctc_weight * CTC; 0: none), decoded by "
        "--decoder ctc.",
    )  # fmt: skip
    seed: int = seed_setting(0, "Seed of weights, shuffling, augmentation.")
    early_stopping: bool = setting(
        True, boolean, kind=None,
        help="With dev_files: stop when the validation loss stops improving.",
    )  # fmt: skip
    patience: int | None = setting(
        None, optional(positive_int), kind=None,
        help="Early stopping's patience, epochs (None: max(5, epochs // 5)).",
    )  # fmt: skip
    min_delta: float = setting(
        0.0, non_negative_float, kind=None,
        help="The least fall of the validation loss that counts as improving.",
    )  # fmt: skip

    def early_stopping_rule(self) -> tuple[int, float] | None:
        """(patience, min_delta) of early stopping, or None without it."""
        if not self.early_stopping:
            return None
        return (self.patience or max(5, self.epochs // 5), self.min_delta)


@dataclasses.dataclass(frozen=True)
class RunConfig(RootConfig):
    """A transducer training run: model, features, data, augment, optimizer, training.

    Every section has defaults; `RunConfig()` is the recipe's LSTM
    transducer (its data aside: give data.train_files).
    """

    KIND = "transducer"
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    features: FeaturesConfig = dataclasses.field(default_factory=FeaturesConfig)
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    augment: AugmentConfig = dataclasses.field(default_factory=AugmentConfig)
    optimizer: OptimizerConfig = dataclasses.field(default_factory=OptimizerConfig)
    training: TrainingConfig = dataclasses.field(default_factory=TrainingConfig)

    def __post_init__(self) -> None:
        if isinstance(self.model, str):  # RunConfig(model="conformer-2m")
            object.__setattr__(self, "model", ModelConfig(self.model))
        super().__post_init__()
        durations = self.model.durations()
        if (self.training.loss in TDT_LOSSES) != (durations is not None):
            raise ValueError(
                f"training.loss {self.training.loss!r} needs a joiner with "
                "durations (model.joiner.durations, e.g. --durations 0,1,2,3,4), "
                "got none"
                if durations is None
                else f"model.joiner.durations {list(durations)} make a "
                f"Token-and-Duration Transducer: training.loss must be one of "
                f"{TDT_LOSSES}, got {self.training.loss!r}"
            )
        warmup, epochs = self.optimizer.lr_warmup_epochs, self.training.epochs
        if warmup >= epochs:
            raise ValueError(
                f"optimizer.lr_warmup_epochs must be below training.epochs "
                f"({epochs}), got {warmup}"
            )

    def check(self) -> None:
        """The values that only building the model's layers checks (named).

        Construction checks the rest without starting TensorFlow's runtime;
        `recipe.train` calls this once its strategy exists.
        """
        self.model.parts()
        check_spec_augment("augment.spec_augment", self.augment.spec_augment)

    def resolved(self) -> "RunConfig":
        """The same run with its defaults spelt out: what run.json records.

        The model as whole part configurations, "default" augmentation as
        its parameters: a preset's or a default's meaning may change between
        releases, a resolved run's does not.
        """
        augment = self.augment
        augment = dataclasses.replace(
            augment,
            spec_augment=spec_augment_policy(augment.spec_augment) or "none",
            wave_augment=wave_augment_config(augment.wave_augment) or "none",
        )
        return dataclasses.replace(self, model=self.model.resolved(), augment=augment)

    LEGACY_SECTIONS = ("features", "model", "data", "training")

    @classmethod
    def _from_legacy(cls, values: Mapping[str, Any]) -> "RunConfig":
        """A 0.1 run.json's configuration: the recipe's keyword arguments.

        Its "model" holds the Transducer's flat arguments; features, data and
        training the recipe's.
        """
        from tf_transducer.models.legacy import legacy_parts

        data, training = dict(values["data"]), dict(values["training"])
        model = dict(values["model"])
        augment = model.get("augment")
        data_keys = ("train_files", "dev_files", "text_encoder", "vocab_size",
                     "word_delimiter", "max_duration")  # fmt: skip
        return cls(
            model=ModelConfig(None, **legacy_parts(model)),
            features=FeaturesConfig(**values["features"]),
            data=DataConfig(**{k: data[k] for k in data_keys}),
            augment=AugmentConfig(
                spec_augment="none" if augment is None else augment,
                wave_augment=data.get("wave_augment") or "none",
                warmup_epochs=training["warmup_epochs"],
            ),
            optimizer=OptimizerConfig(
                learning_rate=training["learning_rate"],
                lr_warmup_epochs=training.get("lr_warmup_epochs", 0),
            ),
            training=TrainingConfig(
                **{k: training[k] for k in ("epochs", "batch_size", "loss", "seed")}
            ),
        )
