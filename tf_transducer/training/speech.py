# SPDX-License-Identifier: Apache-2.0
"""Training a speech model on `SpeechDataset`s through `train_loop`.

On one machine or several: what the transducer and DeepSpeech recipes share.

Each worker passes its own shard of the utterances (`shard_utterances`,
before any audio is read); the epoch's length is the same on every worker
(the shortest shard's); the validation loss and error rates are reduced
over every worker's shard; the chief alone writes the run folder (best
model, history, summaries, run.json) while every worker takes part in the
checkpoints under `backup/` that resume an interrupted run at its step.
"""

import csv
import dataclasses
import os

import keras
import numpy as np
import tensorflow as tf

from tf_transducer.training.distributed import all_reduce_sums
from tf_transducer.training.distributed import is_chief
from tf_transducer.training.distributed import shard_items
from tf_transducer.training.distributed import strategy_from_environment
from tf_transducer.training.distributed import worker_position
from tf_transducer.training.inputs import manifest_list
from tf_transducer.training.loop import check_verbose
from tf_transducer.training.loop import loss_sums
from tf_transducer.training.loop import train_loop
from tf_transducer.training.run_dir import BACKUP_DIR
from tf_transducer.training.run_dir import RunDirectory
from tf_transducer.training.run_dir import RunStateCallback

HISTORY_FILE = "history.csv"
SUMMARIES = "summaries"


def shard_utterances(utterances, strategy):
    """This worker's share of a list of utterances (all of them on one machine).

    Taken before any audio is decoded.
    """
    worker, workers = worker_position(strategy)
    return shard_items(utterances, workers, worker)


def keras_pairs(dataset):
    """SpeechDataset batches -> ((features, feature_length), labels)."""
    return dataset.map(lambda b: ((b["features"], b["feature_length"]), b["labels"]))


def start(config, root, strategy):
    """The start every recipe's train shares, before anything is written.

    Checks that config is a `root` (a RootConfig class) with training
    manifests, makes the strategy (default: `strategy_from_environment()`)
    before TensorFlow's runtime starts, checks what only building the layers
    checks (`config.check()`), and makes the data paths absolute.

    Returns:
      (config with absolute data paths, strategy, training manifests,
      validation manifests).
    """
    if not isinstance(config, root):
        raise ValueError(
            f"config must be a {root.__module__}.{root.__name__}, got "
            f"{type(config).__name__}"
        )
    strategy = strategy or strategy_from_environment()  # before TF's runtime starts
    config.check()
    data = config.data
    train = manifest_list(data.train_files, "data.train_files")
    if not train:
        raise ValueError("data.train_files: give at least one manifest or corpus")
    dev = manifest_list(data.dev_files, "data.dev_files")
    data = dataclasses.replace(
        data,
        train_files=tuple(os.path.abspath(p) for p in train),
        dev_files=tuple(os.path.abspath(p) for p in dev),
    )
    return dataclasses.replace(config, data=data), strategy, train, dev


def run_directory(checkpoint_dir, config, files, overwrite, strategy):
    """The run's folder: written by the chief, checked read-only by the others.

    config: the run's `RootConfig` (run.json records `config.resolved()`,
    where it has one; an older release's run.json is read through its
    `from_legacy`). The chief owns `files`, the history and the summaries.
    """
    resolved = config.resolved() if hasattr(config, "resolved") else config
    root = type(config)

    def upgrade(saved):
        if isinstance(saved, dict) and "kind" in saved:
            return saved
        legacy = root.from_legacy(saved)
        return (legacy.resolved() if hasattr(legacy, "resolved") else legacy).to_dict()

    return RunDirectory(
        checkpoint_dir,
        resolved.to_dict(),
        owned=(*files, HISTORY_FILE, SUMMARIES),
        overwrite=overwrite,
        read_only=not is_chief(strategy),
        upgrade=upgrade,
    )


def steps_per_epoch(train_data, batch_size, strategy, limit=None):
    """Steps of one epoch: the batches of the shortest shard, or `limit`.

    `limit` wins when it is smaller. On one machine an epoch sees every item
    once.
    """
    worker, workers = worker_position(strategy)
    replicas_here = strategy.num_replicas_in_sync // workers
    per_replica = batch_size // strategy.num_replicas_in_sync
    counts = np.zeros(workers)
    counts[worker] = train_data.num_batches(per_replica, "auto") // replicas_here
    steps = int(all_reduce_sums(strategy, counts).min())
    if limit:
        steps = min(steps, limit) if steps else limit
    if steps < 1:
        raise ValueError(
            f"train_files: a worker's shard holds fewer utterances than "
            f"batch_size {batch_size} / {workers} workers"
        )
    return steps


class EpochSummaries(keras.callbacks.Callback):
    """TensorBoard scalars of each epoch's logs (loss, val_loss, val_wer...)."""

    def __init__(self, directory):
        super().__init__()
        self.writer = tf.summary.create_file_writer(directory)

    def on_epoch_end(self, epoch, logs=None):
        with self.writer.as_default():
            for name, value in (logs or {}).items():
                tf.summary.scalar(name, value, step=epoch + 1)
        self.writer.flush()


class HistoryCsv(keras.callbacks.Callback):
    """Appends each epoch's logs to a CSV file (epoch, then the names)."""

    def __init__(self, path):
        super().__init__()
        self.path = path

    def on_epoch_end(self, epoch, logs=None):
        logs = dict(logs or {})
        names = sorted(logs)
        new = not os.path.isfile(self.path) or os.path.getsize(self.path) == 0
        with open(self.path, "a", newline="") as f:
            writer = csv.writer(f)
            if new:
                writer.writerow(["epoch", *names])
            writer.writerow([epoch, *(logs[n] for n in names)])


def fit(
    model_fn, train_data, run_dir, *, epochs, batch_size, seed, strategy, best_file,
    save_weights_only=False, dev_data=None, dev_batch_size=64, error_counts=None,
    early_stopping=None, max_steps_per_epoch=None, summary_dir=None, callbacks=(),
    verbose="auto", augment=None, augment_from_epoch=0,
):  # fmt: skip
    """Trains `model_fn()` on this worker's `train_data`; returns (model, history).

    The history is {"loss": [...], "val_loss": [...], ...} of the epochs this
    call ran.

    Args:
      model_fn: steps_per_epoch -> a built, compiled model; called in
        `strategy.scope()` (after `keras.utils.set_random_seed(seed)`).
      train_data: this worker's shard (a `SpeechDataset` of features).
      run_dir: the `RunDirectory` (the chief's writes; read-only elsewhere).
      epochs: epochs to train.
      batch_size: the global batch size (over every replica).
      seed: training's random seed.
      strategy: from `strategy_from_environment`.
      best_file: name in the run folder of the best model (by val_loss, or
        loss without dev data): `.keras`, or weights with
        save_weights_only.
      save_weights_only: save only the best model's weights.
      dev_data: this worker's shard of the validation data, or None.
      dev_batch_size: the batch size of the validation data.
      error_counts: optional (model, dev_data) -> {"wer": (errors, words),
        ...} over this worker's dev shard; logged as val_wer, ...
      early_stopping: optional (patience, min_delta).
      max_steps_per_epoch: cap on the steps of an epoch.
      summary_dir: the epochs' summaries (default: summaries/ in the run
        folder).
      callbacks: more Keras callbacks (every worker, after the run's own).
      verbose: as Keras `fit`'s: "auto" or 1: a progress bar through
        each epoch on a terminal (the chief's), else a line per epoch;
        2: a line per epoch and four within it; 0: quiet.
      augment: optional waveform augmentation of the training batches (see
        `SpeechDataset.dataset`), seeded by the epoch's seed.
      augment_from_epoch: the first epoch (0-based) augmented: the model
        first learns to align clean audio.
    """
    check_verbose(verbose)
    chief = is_chief(strategy)
    steps = steps_per_epoch(train_data, batch_size, strategy, max_steps_per_epoch)
    with strategy.scope():
        keras.utils.set_random_seed(seed)
        model = model_fn(steps)

    # One pipeline for the clean epochs and one for the augmented ones.
    switch = augment_from_epoch if augment is not None else 0
    restarts = {switch} if 0 < switch < epochs else set()
    local_replicas = strategy.num_replicas_in_sync // worker_position(strategy)[1]

    def dataset_fn(context, epoch):
        end = min(switch, epochs) if epoch < switch else epochs
        data = train_data.epochs(
            context.get_per_replica_batch_size(batch_size),
            seed=int(seed),
            first_epoch=epoch,
            end_epoch=end,
            batches_per_epoch=steps * local_replicas,
            bucket_boundaries="auto",
            augment=augment if epoch >= switch else None,
        )
        return keras_pairs(data)

    validation = None
    if dev_data is not None:

        def validation(model, worker, workers):
            batches = keras_pairs(dev_data.dataset(dev_batch_size, shuffle=False))
            sums = loss_sums(model, batches)
            if error_counts is not None:
                sums.update(error_counts(model, dev_data))
            return sums

    monitor = "val_loss" if dev_data is not None else "loss"
    stopper = None
    all_callbacks = []
    if early_stopping is not None:
        patience, min_delta = early_stopping
        stopper = keras.callbacks.EarlyStopping(
            monitor, patience=patience, min_delta=min_delta
        )
        all_callbacks.append(stopper)
    if chief:
        run_dir.trim_history(HISTORY_FILE, run_dir.state.get("epochs_done", 0))
        all_callbacks = [
            keras.callbacks.ModelCheckpoint(
                run_dir.file(best_file),
                monitor=monitor,
                save_best_only=True,
                save_weights_only=save_weights_only,
                # A resumed run keeps the best model of its earlier epochs.
                initial_value_threshold=run_dir.state.get("best"),
                verbose=0,
            ),
            HistoryCsv(run_dir.file(HISTORY_FILE)),
            EpochSummaries(summary_dir or run_dir.file(SUMMARIES)),
            *all_callbacks,
            RunStateCallback(run_dir, monitor, stopper),
        ]
    all_callbacks += list(callbacks)
    history = train_loop(
        model,
        dataset_fn,
        epochs,
        steps,
        strategy,
        checkpoint_dir=run_dir.file(BACKUP_DIR),
        # Besides each epoch's end: what a long epoch could lose.
        save_every=100 if steps > 200 else 0,
        validation=validation,
        callbacks=all_callbacks,
        log_every=max(1, steps // 4) if verbose == 2 else 0,
        verbose=verbose,
        new_pipeline_at=restarts,
    )
    return model, history
