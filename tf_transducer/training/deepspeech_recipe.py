# SPDX-License-Identifier: Apache-2.0
"""The DeepSpeech recipe: MFCC -> DeepSpeech -> CtcLoss on manifests.

It trains on one machine or several; the models are decoded with CTC search.

    from tf_transducer.training import deepspeech_recipe as recipe

    history = recipe.train(["train.csv"], "runs/ds", dev_files=["dev.csv"],
                           sample_rate=8000, n_hidden=256, epochs=30)
    model, alphabet = recipe.load_checkpoint("runs/ds")
    wer, cer, pairs = recipe.evaluate(model, alphabet, ["test.csv"])

The run folder holds the best weights (best.weights.h5), model.json (the
model's and the alphabet's configuration), run.json, history.csv,
summaries/ and the checkpoints (backup/) that resume an interrupted run.
"""

import json
import os

import keras

from tf_transducer.training import speech
from tf_transducer.training.distributed import is_chief, strategy_from_environment
from tf_transducer.training.loop import check_verbose
from tf_transducer.training.transducer_recipe import manifest_list, read_utterances

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
    train_files,
    checkpoint_dir,
    *,
    dev_files=(),
    alphabet=None,
    model_config=None,
    epochs=75,
    batch_size=16,
    dev_batch_size=16,
    steps_per_epoch=0,
    learning_rate=0.001,
    beta1=0.9,
    beta2=0.999,
    epsilon=1e-8,
    seed=4568,
    early_stop=True,
    es_epochs=25,
    es_min_delta=0.05,
    skip_bad=False,
    summary_dir=None,
    distribution="auto",
    strategy=None,
    overwrite=False,
    callbacks=(),
    verbose="auto",
):
    """Trains DeepSpeech; returns the history dict of this call.

    The history is None when the run in checkpoint_dir had finished earlier.
    distribution, strategy, overwrite, callbacks and verbose are as in
    `transducer_recipe.train`.

    Args:
      train_files: manifests (a list or a comma-separated string).
      checkpoint_dir: the run folder (on a file system every worker sees).
      dev_files: validation manifests, as train_files.
      alphabet: a CharacterAlphabet (default: English).
      model_config: keyword arguments of `tf_transducer.models.DeepSpeech`
        (n_hidden, n_context, dropout rates, sample_rate, feature_win_len,
        feature_win_step, augment, ...); num_classes comes from the alphabet.
      epochs: epochs to train.
      batch_size: the global batch size (over every replica).
      dev_batch_size: the batch size of the validation data.
      steps_per_epoch: steps of an epoch (0: the whole set).
      learning_rate: Adam's learning rate.
      beta1: Adam's beta1.
      beta2: Adam's beta2.
      epsilon: Adam's epsilon.
      seed: training's random seed.
      early_stop: stop when the validation loss (the training loss without
        dev data) stops improving.
      es_epochs: early stopping's patience, in epochs.
      es_min_delta: the least change of that loss that counts as improving.
      skip_bad: drop (and count) unusable items instead of failing.
      summary_dir: the epochs' summaries (default: summaries/ in the run
        folder).
      distribution: which strategy to train under (see
        `strategy_from_environment`), unless `strategy` is given.
      strategy: a tf.distribute strategy, or None.
      overwrite: start over in a run folder of another configuration.
      callbacks: Keras callbacks run at each epoch's end.
      verbose: as Keras `fit`'s: "auto" or 1: a progress bar through
        each epoch on a terminal (the chief's), else a line per epoch;
        2: a line per epoch and four within it; 0: quiet.
    """
    from tf_transducer.data import CharacterAlphabet
    from tf_transducer.losses import CtcLoss
    from tf_transducer.models import DeepSpeech

    check_verbose(verbose)
    strategy = strategy or strategy_from_environment(distribution)
    chief = is_chief(strategy)
    alphabet = alphabet or CharacterAlphabet.english()
    config = dict(model_config or {}, num_classes=alphabet.vocab_size)
    train_manifests = manifest_list(train_files, "train_files")
    if not train_manifests:
        raise ValueError("train_files: give at least one manifest")
    dev_manifests = manifest_list(dev_files, "dev_files")
    run_config = dict(
        model=config,
        alphabet=alphabet.get_config(),
        data=dict(
            train_files=[os.path.abspath(p) for p in train_manifests],
            dev_files=[os.path.abspath(p) for p in dev_manifests],
        ),
        training=dict(
            epochs=epochs,
            train_batch_size=batch_size,
            train_steps_per_epoch=steps_per_epoch,
            learning_rate=learning_rate,
            beta1=beta1,
            beta2=beta2,
            epsilon=epsilon,
            random_seed=seed,
            early_stop=early_stop,
            es_epochs=es_epochs,
            es_min_delta=es_min_delta,
        ),
    )
    run_dir = speech.run_directory(
        checkpoint_dir, run_config, (WEIGHTS, CONFIG), overwrite, strategy
    )
    if run_dir.announce(epochs) == "done":
        return None
    mfcc = DeepSpeech(**config).mfcc
    shard = speech.shard_utterances
    train_data = speech_data(
        shard(read_utterances(train_manifests, "train_files"), strategy),
        alphabet, mfcc, skip_bad, "train_files",
    )  # fmt: skip
    dev_data = None
    if dev_manifests:
        dev_data = speech_data(
            shard(read_utterances(dev_manifests, "dev_files"), strategy),
            alphabet, mfcc, skip_bad, "dev_files",
        )  # fmt: skip
    if chief:
        path = run_dir.file(CONFIG)
        with open(path + ".tmp", "w") as f:
            json.dump({"model": config, "alphabet": alphabet.get_config()}, f, indent=2)
        os.replace(path + ".tmp", path)

    def model_fn(steps):
        model = DeepSpeech(**config)
        model.build()
        model.compile(
            optimizer=keras.optimizers.Adam(learning_rate, beta1, beta2, epsilon),
            loss=CtcLoss(),
            jit_compile=False,
        )
        return model

    _, history = speech.fit(
        model_fn,
        train_data,
        run_dir,
        epochs=epochs,
        batch_size=batch_size,
        seed=seed,
        strategy=strategy,
        best_file=WEIGHTS,
        save_weights_only=True,
        dev_data=dev_data,
        dev_batch_size=dev_batch_size,
        early_stopping=(es_epochs, es_min_delta) if early_stop else None,
        max_steps_per_epoch=steps_per_epoch or None,
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
    from tf_transducer.decoding import ctc_beam_search, ctc_greedy_decode

    if beam_width == 1 and scorer is None:
        return ctc_greedy_decode(logits, lengths)
    return ctc_beam_search(
        logits, lengths, beam_width, scorer=scorer, alpha=alpha, beta=beta
    )


def evaluate(model, alphabet, data, batch_size=16, **decoding):
    """(WER, CER, [(reference, hypothesis)]) on a SpeechDataset.

    `decoding` holds beam_width, scorer, alpha, beta (see `decode`).
    """
    from tf_transducer.decoding import char_error_rate, word_error_rate

    pairs = []
    for batch in data.dataset(batch_size, shuffle=False):
        logits = model((batch["features"], batch["feature_length"]), training=False)
        decoded = decode(logits.numpy(), batch["feature_length"].numpy(), **decoding)
        for index, labels in zip(batch["index"].numpy(), decoded, strict=True):
            pairs.append((data.transcripts[index], alphabet.decode(labels)))
    refs, hyps = [p[0] for p in pairs], [p[1] for p in pairs]
    return word_error_rate(refs, hyps), char_error_rate(refs, hyps), pairs
