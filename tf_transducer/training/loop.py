# SPDX-License-Identifier: Apache-2.0
"""`train_loop`: training under any tf.distribute strategy, resumable.

Keras 3's `Model.fit` does not run under `MultiWorkerMirroredStrategy`
(keras-team/keras#20585, tensorflow/tensorflow#72388), so training on
several machines goes through this loop: `strategy.run` of a step that
calls the model's own `compute_loss` (the loss code `fit` runs) and
`optimizer.apply_gradients`.

The loss is averaged over the global batch exactly once: Keras losses divide
their per-replica mean by the number of replicas, and `apply_gradients`
sums the replicas' gradients, so the step adds no scaling of its own.

With a `checkpoint_dir` the loop is fault tolerant:

- one checkpoint (model, optimizer, the layers' seed generators, step, the
  epoch's running loss) is written by the chief after every epoch and every
  `save_every` steps; the other workers write theirs to scratch folders
  (`workertemp_<task>` beside the checkpoint folder, TF's convention) that
  are removed at once (every worker takes part in a save under
  MultiWorkerMirroredStrategy);
- every worker restores the newest one at start and continues at the exact
  step: the dataset of that epoch is rebuilt (`dataset_fn(context, epoch)`
  must give the same batches for the same epoch) and the steps already done
  are skipped;
- SIGTERM is handled by `tf.distribute.experimental.PreemptionCheckpointHandler`:
  the cluster agrees on a step, saves there and exits with
  `PREEMPTED_EXIT_CODE`, which a supervisor restarts;
- a checkpoint folder written for another model (class or configuration,
  e.g. another vocabulary) is refused, naming both.
"""

import contextlib
import json
import logging as std_logging
import os
import shutil
import sys
import time
from collections.abc import Callable
from collections.abc import Container
from collections.abc import Iterable
from collections.abc import Mapping
from typing import Any
from typing import TypeAlias

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from tf_transducer.training.distributed import all_reduce_sums
from tf_transducer.training.distributed import is_chief
from tf_transducer.training.distributed import strategy_from_environment
from tf_transducer.training.distributed import worker_position
from tf_transducer.training.run_dir import config_differences

PREEMPTED_EXIT_CODE = 42  # the exit code of a worker that saved on SIGTERM
MODEL_FILE = "model.json"  # what the checkpoints in a folder belong to
SCRATCH = "workertemp_"  # + task: a non-chief's save, removed at once
# train_loop's dataset_fn: (context, epoch) -> that epoch's (x, y) batches.
DatasetFn: TypeAlias = Callable[[tf.distribute.InputContext, int], tf.data.Dataset]
# train_loop's validation: (model, pipeline_id, num_pipelines) -> {name: (sum, count)}.
Validation: TypeAlias = Callable[
    [keras.Model, int, int], Mapping[str, tuple[float, float]]
]


# Settings that do not change what a checkpoint holds.
_NOT_DESCRIBED = ("name", "dtype", "trainable")


def model_description(model: keras.Model) -> dict[str, Any]:
    """What a checkpoint belongs to: the model's class and configuration.

    The configuration leaves out the names and dtype policies, the model's
    and its parts' (Keras names a layer after how many came before it).
    """
    return json.loads(
        json.dumps(
            {"class": type(model).__name__, "config": _described(model.get_config())},
            default=repr,
        )
    )


def _described(config):
    """A config without names and dtype policies, at every depth."""
    if isinstance(config, dict):
        return {k: _described(v) for k, v in config.items() if k not in _NOT_DESCRIBED}
    if isinstance(config, list):
        return [_described(v) for v in config]
    return config


def _check_description(path, model, chief):
    """Refuses a checkpoint folder of another model.

    The chief records this model's identity in a new folder.
    """
    wanted = model_description(model)
    if os.path.isfile(path):
        with open(path) as f:
            saved = json.load(f)
        if saved != wanted:
            differences = "; ".join(config_differences(saved, wanted))
            raise ValueError(
                f"{os.path.dirname(path)} holds checkpoints of another model "
                f"({differences}): saved {json.dumps(saved, sort_keys=True)}, "
                f"this one {json.dumps(wanted, sort_keys=True)}; use another "
                "checkpoint_dir"
            )
        return
    if not chief:
        return
    with open(path + ".tmp", "w") as f:
        json.dump(wanted, f, indent=1, sort_keys=True)
    os.replace(path + ".tmp", path)


@contextlib.contextmanager
def _without_tf_info():
    """TensorFlow's INFO lines (signal watchers, saver timings) left out.

    The savers log through absl's logger, the rest through TensorFlow's.
    """
    loggers = [tf.get_logger(), logging.get_absl_logger()]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(max(logger.getEffectiveLevel(), std_logging.WARNING))
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


class _Checkpoints:
    """The run's checkpoint: restored at start, saved by every worker and on SIGTERM.

    The chief's copy is the one kept.
    """

    def __init__(self, model, strategy, directory, chief):
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self.loss_sum = tf.Variable(0.0, dtype=tf.float64, trainable=False)
        weights = {id(v) for v in model.weights}
        self.checkpoint = tf.train.Checkpoint(
            model=model,
            optimizer=model.optimizer,
            # The layers' seed generators (SpecAugment, dropout): their
            # states are not weights, and a resumed run must draw what the
            # interrupted one would have.
            random_states=[v for v in model.variables if id(v) not in weights],
            step=self.step,
            epoch_loss_sum=self.loss_sum,
        )
        os.makedirs(directory, exist_ok=True)
        _check_description(os.path.join(directory, MODEL_FILE), model, chief)
        resolver = getattr(strategy, "cluster_resolver", None)
        # Restores the newest checkpoint in `directory` on every worker.
        with _without_tf_info():
            self.preemption = tf.distribute.experimental.PreemptionCheckpointHandler(
                resolver,
                self.checkpoint,
                directory,
                tf.distribute.experimental.TerminationConfig(
                    exit_fn=lambda: sys.exit(PREEMPTED_EXIT_CODE), save_fn=self.save
                ),
            )
        self.scratch = None
        if chief:
            self.writer = tf.train.CheckpointManager(
                self.checkpoint, directory, max_to_keep=2
            )
        else:
            # Where PreemptionCheckpointHandler puts a non-chief's copy too.
            task = resolver.task_id if resolver is not None else 0
            parent, base = os.path.split(os.path.normpath(directory))
            self.scratch = os.path.join(parent, f"{SCRATCH}{task}")
            self.writer = tf.train.CheckpointManager(
                self.checkpoint, os.path.join(self.scratch, base), max_to_keep=1
            )
            shutil.rmtree(self.scratch, ignore_errors=True)
        self.chief = chief

    def save(self):
        with _without_tf_info():
            self.writer.save(checkpoint_number=int(self.step.numpy()))
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)


def _step_function(model):
    """One replica's step: (x, y) -> the replica's loss.

    The loss is already divided by the number of replicas, as Keras does.
    """
    optimizer = model.optimizer
    variables = model.trainable_variables

    def step(x, y):
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True)
            loss = model.compute_loss(x=x, y=y, y_pred=y_pred, training=True)
            scaled = optimizer.scale_loss(loss)
        grads = tape.gradient(scaled, variables)
        optimizer.apply_gradients(zip(grads, variables, strict=True))
        return loss

    return step


def loss_sums(
    model: keras.Model, dataset: Iterable[Any]
) -> dict[str, tuple[float, int]]:
    """One worker's share of a validation loss, as {"loss": (sum, items)}.

    The sum is of a model's losses on (x, y) batches, weighted by the
    batches' sizes, computed with the model's own `compute_loss` (see
    `train_loop`'s `validation`).
    """
    # Keras divides a loss by the replicas inside a strategy's scope.
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    total, count = 0.0, 0
    for x, y in dataset:
        y_pred = model(x, training=False)
        loss = model.compute_loss(x=x, y=y, y_pred=y_pred, training=False)
        n = int(tf.shape(tf.nest.flatten(y)[0])[0])
        total += float(loss) * replicas * n
        count += n
    return {"loss": (total, count)}


def _check_positive(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


VERBOSE = ("auto", 0, 1, 2)


def check_verbose(verbose: Any) -> None:
    """Refuses a `verbose` other than "auto", 0, 1 or 2 (`fit`'s values)."""
    if isinstance(verbose, bool) or verbose not in VERBOSE:
        raise ValueError(f'verbose must be "auto", 0, 1 or 2, got {verbose!r}')


def _shows_bar(chief, verbose):
    """Whether the chief draws a progress bar: `fit`'s rule.

    "auto" and 1 draw one when standard output is interactive (a terminal
    or a notebook) and Keras prints to it.
    """
    if not chief or verbose not in ("auto", 1):
        return False
    isatty = getattr(sys.stdout, "isatty", None)
    interactive = bool(isatty and isatty()) or "ipykernel" in sys.modules
    return interactive and keras.config.is_interactive_logging_enabled()


def train_loop(
    model: keras.Model, dataset_fn: DatasetFn, epochs: int, steps_per_epoch: int,
    strategy: tf.distribute.Strategy | None = None, *,
    checkpoint_dir: str | None = None, save_every: int = 0,
    validation: Validation | None = None,
    callbacks: Iterable[keras.callbacks.Callback] = (), log_every: int = 10,
    verbose: str | int = "auto", new_pipeline_at: Container[int] | None = None,
) -> dict[str, list[float]]:  # fmt: skip
    """Trains a compiled model; returns {"loss": [...], "val_...": [...]}.

    The history holds one value per epoch run by this call (reduced across
    workers).

    Args:
      model: a Keras model built and compiled under `strategy.scope()`,
        whose `compute_loss(x, y, y_pred, training)` gives the loss (all of
        ours do).
      dataset_fn: `(tf.distribute.InputContext, epoch) -> tf.data.Dataset`
        of (x, y) batches of `context.get_per_replica_batch_size(global)`
        items from this worker's shard (`context.input_pipeline_id` of
        `context.num_input_pipelines`), at least `steps_per_epoch` for each
        local replica; the same batches for the same epoch (seed the
        shuffle with the epoch) so that a resumed run sees what the
        interrupted one would have.
      epochs: a positive int.
      steps_per_epoch: a positive int.
      strategy: default: `strategy_from_environment()`.
      checkpoint_dir: resume from and save to this folder (see the module
        docstring), or None.
      save_every: steps between checkpoints besides the one after each
        epoch (0: epochs only).
      validation: optional `(model, pipeline_id, num_pipelines) ->
        {name: (sum, count)}` run after each epoch on every worker over its
        shard of the validation data; the loop adds the sums and counts of
        all workers and logs `val_<name>` = sum / count (e.g. `loss_sums`
        gives the validation loss; word errors and words give the WER).
      callbacks: Keras callbacks, run on every worker (give writing ones to
        the chief only); `model.stop_training` ends training after the epoch.
      log_every: steps between progress lines when no bar is drawn (0:
        none).
      verbose: what the chief prints, as `fit`'s verbose: "auto" or 1: a
        progress bar through each epoch (steps done, running loss, time
        left) when standard output is a terminal (or a notebook), else as
        2; 2: a line per epoch and one every `log_every` steps; 0: nothing
        (those lines go to absl's log only, as on the other workers).
      new_pipeline_at: None: `dataset_fn` is called for every epoch (a new
        pipeline and iterator each). Otherwise the epochs (a collection of
        ints) at which it is called again besides the first epoch run;
        `dataset_fn(context, epoch)` then gives the batches of that epoch
        and of every later one up to the next restart, in order, exactly
        `steps_per_epoch` per local replica and epoch, and one iterator
        serves them all (see `SpeechDataset.epochs`).
    """
    _check_positive("epochs", epochs)
    _check_positive("steps_per_epoch", steps_per_epoch)
    check_verbose(verbose)
    if (
        isinstance(save_every, bool)
        or not isinstance(save_every, int)
        or save_every < 0
    ):
        raise ValueError(f"save_every must be an int >= 0, got {save_every!r}")
    if getattr(model, "optimizer", None) is None:
        raise ValueError("model: compile it (with an optimizer and our loss) first")
    strategy = strategy or strategy_from_environment()
    chief = is_chief(strategy)
    with strategy.scope():
        if not model.built or not model.trainable_variables:
            # An unbuilt model makes its weights on a first batch (as `fit`
            # does), not inside the distributed step.
            x, _ = next(iter(dataset_fn(tf.distribute.InputContext(), 0)))
            model(x, training=False)
        if not model.optimizer.built:
            # Its variables (Adam's moments, ...) too.
            model.optimizer.build(model.trainable_variables)
    step_fn = _step_function(model)
    local_replicas = strategy.num_replicas_in_sync // worker_position(strategy)[1]

    @tf.function
    def distributed_step(iterator):
        x, y = next(iterator)
        losses = strategy.run(step_fn, args=(x, y))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    state = None
    if checkpoint_dir:
        state = _Checkpoints(model, strategy, checkpoint_dir, chief)
    done = int(state.step.numpy()) if state else 0
    first_epoch, skip = divmod(done, steps_per_epoch)
    say = _reporter(chief, verbose)
    shows_bar = _shows_bar(chief, verbose)
    if done:
        say(f"{checkpoint_dir}: resuming at epoch {first_epoch + 1}, step {skip}")
    callback_list = keras.callbacks.CallbackList(
        list(callbacks), model=model, epochs=epochs, steps=steps_per_epoch, verbose=0
    )
    history: dict[str, list[float]] = {}
    model.stop_training = False
    callback_list.on_train_begin()
    iterator = None
    for epoch in range(first_epoch, epochs):
        callback_list.on_epoch_begin(epoch)

        def epoch_dataset(context, epoch=epoch, skip=skip):
            # Steps already trained (a resumed run) are skipped.
            return dataset_fn(context, epoch).skip(skip * local_replicas)

        if iterator is None or new_pipeline_at is None or epoch in new_pipeline_at:
            iterator = iter(strategy.distribute_datasets_from_function(epoch_dataset))
        total = state.loss_sum.numpy() if state and skip else 0.0
        start = time.time()
        bar = None
        if shows_bar:
            say(f"epoch {epoch + 1}/{epochs}")
            bar = keras.utils.Progbar(steps_per_epoch, stateful_metrics=["loss"])
            if skip:
                bar.update(skip, [("loss", total / skip)], finalize=False)
        for i in range(skip, steps_per_epoch):
            if state:
                loss = float(state.preemption.run(distributed_step, iterator))
            else:
                loss = float(distributed_step(iterator))
            total += loss
            if state:
                state.step.assign_add(1)
                state.loss_sum.assign(total)
                if save_every and (i + 1) % save_every == 0 and i + 1 < steps_per_epoch:
                    state.save()
            if bar is not None:
                # The epoch's running loss, as `fit` shows it.
                bar.update(i + 1, [("loss", total / (i + 1))], finalize=False)
            elif log_every and (i + 1) % log_every == 0:
                say(
                    f"epoch {epoch + 1} step {i + 1}/{steps_per_epoch}: loss {loss:.4f}"
                )
        skip = 0
        logs = {"loss": total / steps_per_epoch}
        if bar is not None:
            bar.update(steps_per_epoch, list(logs.items()), finalize=True)
        if validation is not None:
            sums = validation(model, *worker_position(strategy))
            for name, value in _reduced_ratios(strategy, sums).items():
                logs[f"val_{name}"] = value
        if state:
            state.loss_sum.assign(0.0)
            state.save()
        for name, value in logs.items():
            history.setdefault(name, []).append(value)
        values = " - ".join(f"{k}: {v:.4f}" for k, v in logs.items())
        say(f"epoch {epoch + 1}/{epochs} ({time.time() - start:.1f} s): {values}")
        callback_list.on_epoch_end(epoch, logs)
        if model.stop_training:
            break
    callback_list.on_train_end()
    # Every worker leaves together (a barrier), so that none sees its peers
    # gone while it still talks to them.
    all_reduce_sums(strategy, [0.0])
    return history


def _reporter(chief, verbose):
    """Progress lines: printed on the chief, logged elsewhere."""

    def say(line):
        if chief and verbose:
            print(line, flush=True)
        else:
            logging.info("%s", line)

    return say


def _reduced_ratios(strategy, sums):
    """{name: (sum, count)} of this worker -> {name: total sum / total count}."""
    names = sorted(sums)
    values = np.array([v for name in names for v in sums[name]], np.float64)
    totals = all_reduce_sums(strategy, values)
    return {
        name: float(totals[2 * i] / totals[2 * i + 1]) if totals[2 * i + 1] else
        float("nan")
        for i, name in enumerate(names)
    }  # fmt: skip
