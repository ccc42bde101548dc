# SPDX-License-Identifier: Apache-2.0
"""The transducer recipe: a log-mel RNN-T model trained on manifests, from a RunConfig.

It trains on one machine or several; the models are then evaluated and
decoded.

    from tf_transducer.training import transducer_recipe as recipe
    from tf_transducer.training.config import DataConfig, RunConfig, TrainingConfig

    config = RunConfig(
        data=DataConfig(train_files=("train.csv",), dev_files=("dev.csv",)),
        training=TrainingConfig(epochs=30),
    )
    model, encoder, history = recipe.train(config, "runs/t")
    test, features = recipe.speech_data(["test.csv"], encoder, 16000, 80)
    wer, cer, pairs = recipe.evaluate(model, encoder, test, beam_width=4)

Everything a run needs later is in `checkpoint_dir`: the best model by dev
loss (best.keras), the text encoder (text_encoder.json), run.json (the
whole configuration, `RunConfig.resolved()`, and progress), history.csv,
summaries/ and the checkpoints (backup/) that resume an interrupted run at
its step. Training runs through `train_loop` under the given strategy (by
default `strategy_from_environment()`): several workers each read their
own shard of the manifests.
"""

import functools
import os
from collections.abc import Sequence
from typing import Any

import keras

from tf_transducer.data.text import save_text_encoder_json
from tf_transducer.training import speech
from tf_transducer.training.config import AUGMENT_DEFAULT  # noqa: F401 (the recipe's names, as before)
from tf_transducer.training.config import LOSSES  # noqa: F401 (the recipe's names, as before)
from tf_transducer.training.config import TEXT_ENCODERS  # noqa: F401 (the recipe's names, as before)
from tf_transducer.training.config import WARMUP_EPOCHS  # noqa: F401 (the recipe's names, as before)
from tf_transducer.training.config import WAVE_AUGMENT_DEFAULT  # noqa: F401 (the recipe's names, as before)
from tf_transducer.training.config import RunConfig  # noqa: F401 (the recipe's names, as before)
from tf_transducer.training.config import spec_augment_policy  # noqa: F401 (the recipe's names, as before)
from tf_transducer.training.config import wave_augment_config  # noqa: F401 (the recipe's names, as before)
from tf_transducer.training.distributed import all_reduce_sums
from tf_transducer.training.distributed import is_chief
from tf_transducer.training.inputs import make_text_encoder  # noqa: F401 (as before)
from tf_transducer.training.inputs import manifest_list  # noqa: F401 (as before)
from tf_transducer.training.inputs import read_utterances  # noqa: F401 (as before)
from tf_transducer.training.inputs import speech_data  # noqa: F401 (as before)
from tf_transducer.training.loop import check_verbose
from tf_transducer.training.run_dir import RUN_FILE
from tf_transducer.training.transducer_eval import decode_batch  # noqa: F401 (as before)
from tf_transducer.training.transducer_eval import error_counts  # noqa: F401 (as before)
from tf_transducer.training.transducer_eval import evaluate  # noqa: F401 (as before)
from tf_transducer.training.transducer_eval import evaluate_export  # noqa: F401 (as before)
from tf_transducer.training.transducer_eval import transcribe_data  # noqa: F401 (as before)

MODEL_FILE, ENCODER_FILE = "best.keras", "text_encoder.json"
BABBLE_UTTERANCES = 64


def build_model(
    config: RunConfig,
    vocab_size: int,
    steps_per_epoch: int = 0,
    parts: dict[str, dict[str, Any]] | None = None,
) -> Any:
    """The run's Transducer, built (not yet compiled, normalisation not adapted).

    Args:
      config: the run's configuration (its model, features and augment).
      vocab_size: the text encoder's classes (blank included).
      steps_per_epoch: SpecAugment starts after augment.warmup_epochs of
        them (0: from the first step).
      parts: `config.model.parts()`, when known already (working them out
        builds and checks the parts, which draws seeds: a seeded run does
        it before seeding).
    """
    from tf_transducer.layers.spec_augment import PRESETS
    from tf_transducer.models import Transducer

    parts = parts or config.model.parts()
    policy = spec_augment_policy(config.augment.spec_augment)
    if policy is not None:  # clean features for the warm-up epochs
        policy = PRESETS[policy] if isinstance(policy, str) else policy
        policy = dict(policy, start_step=config.augment.warmup_epochs * steps_per_epoch)
    model = Transducer(
        vocab_size,
        **parts,
        feature_dim=config.features.n_mels,
        normalization="global",
        augment=policy,
        ctc_weight=config.training.ctc_weight,
    )
    model.build()
    return model


def _compile(model: Any, config: RunConfig, steps: int) -> None:
    """Adam (AdamW) on a cosine decay (after a linear rise) and the run's loss."""
    from tf_transducer.losses import FusedRnntLoss
    from tf_transducer.losses import FusedTdtLoss
    from tf_transducer.losses import PrunedRnntLoss
    from tf_transducer.losses import RnntLoss
    from tf_transducer.losses import TdtLoss

    opt, training = config.optimizer, config.training
    rise = opt.lr_warmup_epochs * steps
    schedule = keras.optimizers.schedules.CosineDecay(
        0.0 if rise else opt.learning_rate,
        training.epochs * steps - rise,
        alpha=opt.final_lr_fraction,
        warmup_target=opt.learning_rate if rise else None,
        warmup_steps=rise,
    )
    loss = {
        "full": RnntLoss,
        "fused": FusedRnntLoss,
        "pruned": lambda: PrunedRnntLoss(s_range=training.pruned_range),
        "tdt": lambda: TdtLoss(
            durations=config.model.durations() or (),  # (RunConfig checked them)
            sigma=training.tdt_sigma,
            omega=training.tdt_omega,
        ),
        "fused_tdt": lambda: FusedTdtLoss(
            durations=config.model.durations() or (),
            sigma=training.tdt_sigma,
            omega=training.tdt_omega,
        ),
    }[training.loss]()
    if opt.weight_decay > 0:
        optimizer = keras.optimizers.AdamW(
            schedule, weight_decay=opt.weight_decay, clipnorm=opt.clipnorm
        )
    else:
        optimizer = keras.optimizers.Adam(schedule, clipnorm=opt.clipnorm)
    model.compile(optimizer=optimizer, loss=loss)


def train(
    config: RunConfig, checkpoint_dir: str, *, strategy: Any = None,
    overwrite: bool = False, callbacks: Sequence[keras.callbacks.Callback] = (),
    verbose: str | int = "auto",
) -> tuple[Any, Any, dict[str, list[float]] | None]:  # fmt: skip
    """Trains the run a RunConfig describes; returns (model, text encoder, history).

    The history is None when the run in checkpoint_dir had finished earlier.

    Training again into the same folder resumes an interrupted run at its
    step, or leaves a finished one alone, when the configuration is the same;
    another configuration is refused (ValueError naming the differences)
    unless overwrite.

    Args:
      config: the run (`tf_transducer.training.config.RunConfig`);
        data.train_files must name at least one manifest or corpus
        (LibriSpeech folders, Common Voice .tsv files, .txt transcripts of
        audio folders: `read_utterances`).
      checkpoint_dir: the run folder (on a file system every worker sees).
      strategy: a tf.distribute strategy (default:
        `strategy_from_environment()`: TF_CONFIG naming several workers ->
        multi-worker, else this machine's GPUs or its CPU).
      overwrite: start over in a run folder of another configuration.
      callbacks: Keras callbacks run at each epoch's end.
      verbose: as Keras `fit`'s: "auto" or 1: a progress bar through
        each epoch on a terminal (the chief's), else a line per epoch;
        2: a line per epoch and four within it; 0: quiet.
    """
    check_verbose(verbose)
    config, strategy, train_manifests, dev_manifests = speech.start(
        config, RunConfig, strategy
    )
    chief = is_chief(strategy)
    data = config.data
    train_utterances = read_utterances(train_manifests, "data.train_files")
    text_enc = make_text_encoder(
        data.text_encoder, [u.transcript for u in train_utterances], data.vocab_size,
        data.word_delimiter,
    )  # fmt: skip
    run_dir = speech.run_directory(
        checkpoint_dir,
        config,
        (MODEL_FILE, ENCODER_FILE),
        overwrite,
        strategy,
    )
    epochs = config.training.epochs
    if run_dir.announce(epochs) == "done":
        model, text_enc = load_checkpoint(checkpoint_dir)
        return model, text_enc, None
    rate, mels = config.features.sample_rate, config.features.n_mels
    mine = speech.shard_utterances(train_utterances, strategy)
    train_data, _ = speech_data(
        mine, text_enc, rate, mels, data.max_duration, data.skip_bad
    )
    dev_data = None
    if dev_manifests:
        dev_utterances = read_utterances(dev_manifests, "data.dev_files")
        dev_data, _ = speech_data(
            speech.shard_utterances(dev_utterances, strategy),
            text_enc, rate, mels, data.max_duration, data.skip_bad,
        )  # fmt: skip
    if chief:
        save_text_encoder_json(text_enc, run_dir.file(ENCODER_FILE))
    wave = make_wave_augment(
        wave_augment_config(config.augment.wave_augment),
        train_manifests,
        rate,
        config.training.seed,
    )

    parts = config.model.parts()

    def model_fn(steps):
        model = build_model(config, text_enc.vocab_size, steps, parts)
        # Statistics over every worker's shard: the same on each.
        model.normalizer.adapt(
            train_data.dataset(64, shuffle=False),
            combine=functools.partial(all_reduce_sums, strategy),
        )
        _compile(model, config, steps)
        return model

    model, history = speech.fit(
        model_fn,
        train_data,
        run_dir,
        epochs=epochs,
        batch_size=config.training.batch_size,
        seed=config.training.seed,
        strategy=strategy,
        best_file=MODEL_FILE,
        dev_data=dev_data,
        error_counts=functools.partial(error_counts, encoder=text_enc),
        early_stopping=(
            config.training.early_stopping_rule() if dev_data is not None else None
        ),
        callbacks=callbacks,
        verbose=verbose,
        augment=wave,
        augment_from_epoch=config.augment.warmup_epochs,
    )
    return model, text_enc, history


def make_wave_augment(config, manifests, sample_rate, seed):
    """The `WaveAugment` of a wave_augment config (None: none).

    Its babble is made of BABBLE_UTTERANCES training utterances.
    """
    from tf_transducer.data import calibration_audio
    from tf_transducer.data.augment import WaveAugment
    from tf_transducer.data.augment import make_babble_bank

    if config is None:
        return None
    params = dict(config)
    bank = None
    if params.pop("babble"):
        talkers = calibration_audio(manifests, sample_rate, BABBLE_UTTERANCES)
        bank = make_babble_bank(talkers, sample_rate=sample_rate, seed=seed)
    return WaveAugment(sample_rate=sample_rate, babble=bank, **params)


def load_checkpoint(checkpoint_dir):
    """(model, text encoder) of a training run's folder."""
    from tf_transducer.data.text import load_text_encoder_json

    model_path = os.path.join(checkpoint_dir, MODEL_FILE)
    encoder_path = os.path.join(checkpoint_dir, ENCODER_FILE)
    if not (os.path.isfile(model_path) and os.path.isfile(encoder_path)):
        raise FileNotFoundError(
            f"checkpoint_dir {checkpoint_dir!r} holds no checkpoint ({MODEL_FILE} "
            f"and {ENCODER_FILE}); train first"
        )
    model = keras.models.load_model(model_path, compile=False)
    encoder = load_text_encoder_json(encoder_path)
    if encoder.vocab_size != model.vocab_size:
        raise ValueError(
            f"{encoder_path}: the text encoder has {encoder.vocab_size} classes but "
            f"the model in {model_path} has {model.vocab_size}"
        )
    return model, encoder


def saved_config(checkpoint_dir: str) -> RunConfig:
    """The RunConfig a run was trained with (its run.json, 0.1's layout too).

    Raises:
      ValueError: no readable run.json (the message names the file).
    """
    path = os.path.join(checkpoint_dir, RUN_FILE)
    try:
        return RunConfig.from_json(path)
    except ValueError as error:
        raise ValueError(
            f"cannot read the run's configuration: {error}; train into "
            "checkpoint_dir again"
        ) from None


def saved_features(checkpoint_dir: str) -> dict[str, int]:
    """{"sample_rate", "n_mels"} a run was trained with (from run.json)."""
    features = saved_config(checkpoint_dir).features
    return dict(sample_rate=features.sample_rate, n_mels=features.n_mels)


def saved_train_files(checkpoint_dir: str) -> list[str]:
    """The training manifests a run was trained on (from run.json)."""
    return list(saved_config(checkpoint_dir).data.train_files)
