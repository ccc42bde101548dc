# SPDX-License-Identifier: Apache-2.0
"""The DeepSpeech recipe: MFCC -> DeepSpeech -> CtcLoss on manifests.

It trains on one machine or several; the models are decoded with CTC search.

    from tf_transducer.training import deepspeech_recipe as recipe
    from tf_transducer.training.deepspeech_config import (
        DeepSpeechDataConfig, DeepSpeechModelConfig, DeepSpeechRunConfig,
        DeepSpeechTrainingConfig)

    history = recipe.train(DeepSpeechRunConfig(
        model=DeepSpeechModelConfig(n_hidden=256, sample_rate=8000),
        data=DeepSpeechDataConfig(train_files=("train.csv",), dev_files=("dev.csv",)),
        training=DeepSpeechTrainingConfig(epochs=30)), "runs/ds")
    model, alphabet = recipe.load_checkpoint("runs/ds")
    wer, cer, pairs = recipe.evaluate(model, alphabet, ["test.csv"])

The run folder holds the best weights (best.weights.h5), model.json (the
model's and the alphabet's configuration), run.json (the whole
DeepSpeechRunConfig and progress), history.csv,
summaries/ and the checkpoints (backup/) that resume an interrupted run.
"""

import json
import os
from collections.abc import Sequence
from typing import Any

import keras

from tf_transducer.training import speech
from tf_transducer.training.deepspeech_config import DeepSpeechRunConfig
from tf_transducer.training.distributed import is_chief
from tf_transducer.training.inputs import read_utterances
from tf_transducer.training.loop import check_verbose

WEIGHTS, CONFIG = "best.weights.h5", "model.json"


def ctc_item_check(mfcc):
    """An item check for SpeechDataset: why an utterance is too short for CTC.

    The check gives the reason an utterance is too short for its transcript
    (labels + repeats > frames), or None.
    """

    def fits_ctc(labels, seconds):
        samples = int(round(seconds * mfcc.sample_rate))
        frames = max(0, (samples - mfcc.frame_length) // mfcc.frame_step + 1)
        needed = len(labels) + sum(
            a == b for a, b in zip(labels, labels[1:], strict=False)
        )
        if needed > frames:
            return (
                f"{len(labels)} labels need {needed} CTC frames but the audio "
                f"gives {frames}"
            )
        return None

    return fits_ctc


def speech_data(utterances, alphabet, mfcc, skip_bad=False, name="manifests"):
    """A SpeechDataset of MFCCs over utterances (or manifest paths).

    Its items are checked for CTC; None when there are no utterances.
    """
    from tf_transducer.data import SpeechDataset

    if utterances and isinstance(utterances[0], str):
        utterances = read_utterances(utterances, name)
    if not utterances:
        return None
    try:
        return SpeechDataset(
            utterances, alphabet, mfcc.sample_rate, mfcc, skip_bad=skip_bad,
            item_check=ctc_item_check(mfcc),
        )  # fmt: skip
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None


def train(
    config: DeepSpeechRunConfig, checkpoint_dir: str, *, strategy: Any = None,
    overwrite: bool = False, summary_dir: str | None = None,
    callbacks: Sequence[keras.callbacks.Callback] = (), verbose: str | int = "auto",
) -> dict[str, list[float]] | None:  # fmt: skip
    """Trains the DeepSpeech run a DeepSpeechRunConfig describes; returns its history.

    The history is None when the run in checkpoint_dir had finished earlier.
    Re-runs resume, finish or are refused as in `transducer_recipe.train`.

    Args:
      config: the run (`tf_transducer.training.deepspeech_config`);
        data.train_files must name at least one manifest.
      checkpoint_dir: the run folder (on a file system every worker sees).
      strategy: as `transducer_recipe.train`'s.
      overwrite: as `transducer_recipe.train`'s.
      summary_dir: the epochs' summaries (default: summaries/ in the run
        folder).
      callbacks: as `transducer_recipe.train`'s.
      verbose: as `transducer_recipe.train`'s (Keras fit's values).
    """
    from tf_transducer.data import CharacterAlphabet
    from tf_transducer.losses import CtcLoss
    from tf_transducer.models import DeepSpeech

    check_verbose(verbose)
    config, strategy, train_manifests, dev_manifests = speech.start(
        config, DeepSpeechRunConfig, strategy
    )
    chief = is_chief(strategy)
    data, training, opt = config.data, config.training, config.optimizer
    alphabet = CharacterAlphabet(list(data.alphabet))
    model_kwargs = config.model.keras_arguments(alphabet.vocab_size)
    run_dir = speech.run_directory(
        checkpoint_dir, config, (WEIGHTS, CONFIG), overwrite, strategy
    )
    if run_dir.announce(training.epochs) == "done":
        return None
    mfcc = DeepSpeech(**model_kwargs).mfcc
    shard = speech.shard_utterances
    train_data = speech_data(
        shard(read_utterances(train_manifests, "data.train_files"), strategy),
        alphabet, mfcc, data.skip_bad, "data.train_files",
    )  # fmt: skip
    dev_data = None
    if dev_manifests:
        dev_data = speech_data(
            shard(read_utterances(dev_manifests, "data.dev_files"), strategy),
            alphabet, mfcc, data.skip_bad, "data.dev_files",
        )  # fmt: skip
    if chief:
        path = run_dir.file(CONFIG)
        with open(path + ".tmp", "w") as f:
            json.dump(
                {"model": model_kwargs, "alphabet": alphabet.get_config()}, f, indent=2
            )
        os.replace(path + ".tmp", path)

    def model_fn(steps):
        model = DeepSpeech(**model_kwargs)
        model.build()
        model.compile(
            optimizer=keras.optimizers.Adam(
                opt.learning_rate, opt.beta1, opt.beta2, opt.epsilon
            ),
            loss=CtcLoss(),
            jit_compile=False,
        )
        return model

    _, history = speech.fit(
        model_fn,
        train_data,
        run_dir,
        epochs=training.epochs,
        batch_size=training.batch_size,
        seed=training.seed,
        strategy=strategy,
        best_file=WEIGHTS,
        save_weights_only=True,
        dev_data=dev_data,
        dev_batch_size=training.dev_batch_size,
        early_stopping=(
            (training.es_epochs, training.es_min_delta) if training.early_stop else None
        ),
        max_steps_per_epoch=training.steps_per_epoch or None,
        summary_dir=summary_dir,
        callbacks=callbacks,
        verbose=verbose,
    )
    return history


def load_checkpoint(checkpoint_dir):
    """(model with the best weights, alphabet, the saved model config)."""
    from tf_transducer.data import CharacterAlphabet
    from tf_transducer.models import DeepSpeech

    weights = os.path.join(checkpoint_dir, WEIGHTS)
    config_path = os.path.join(checkpoint_dir, CONFIG)
    if not (os.path.isfile(weights) and os.path.isfile(config_path)):
        raise FileNotFoundError(
            f"checkpoint_dir {checkpoint_dir!r} holds no checkpoint "
            f"({WEIGHTS} and {CONFIG}); train first"
        )
    with open(config_path) as f:
        saved = json.load(f)
    model = DeepSpeech(**saved["model"])
    model.build()
    model.load_weights(weights)
    return model, CharacterAlphabet.from_config(saved["alphabet"]), saved["model"]


def decode(logits, lengths, beam_width=1, scorer=None, alpha=0.75, beta=1.85):
    """Label sequences of CTC logits [B, T, C].

    Greedy search with beam_width 1 and no scorer, else beam search with the
    scorer's LM.
    """
    from tf_transducer.decoding import ctc_beam_search
    from tf_transducer.decoding import ctc_greedy_decode

    if beam_width == 1 and scorer is None:
        return ctc_greedy_decode(logits, lengths)
    return ctc_beam_search(
        logits, lengths, beam_width, scorer=scorer, alpha=alpha, beta=beta
    )


def evaluate(model, alphabet, data, batch_size=16, **decoding):
    """(WER, CER, [(reference, hypothesis)]) on a SpeechDataset.

    `decoding` holds beam_width, scorer, alpha, beta (see `decode`).
    """
    from tf_transducer.decoding import char_error_rate
    from tf_transducer.decoding import word_error_rate

    pairs = []
    for batch in data.dataset(batch_size, shuffle=False):
        logits = model((batch["features"], batch["feature_length"]), training=False)
        decoded = decode(logits.numpy(), batch["feature_length"].numpy(), **decoding)
        for index, labels in zip(batch["index"].numpy(), decoded, strict=True):
            pairs.append((data.transcripts[index], alphabet.decode(labels)))
    refs, hyps = [p[0] for p in pairs], [p[1] for p in pairs]
    return word_error_rate(refs, hyps), char_error_rate(refs, hyps), pairs
