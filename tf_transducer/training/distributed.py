"""Training under any tf.distribute strategy, across machines included.

Keras 3's `Model.fit` does not run under `MultiWorkerMirroredStrategy`
(keras-team/keras#20585, tensorflow/tensorflow#72388: it fails before the
first step reducing the first batch's nest, then on scalar metrics), so
training on several machines goes through `train_loop`, a custom loop:
`strategy.run` of a step that calls the model's own `compute_loss` (the
same loss code as under `fit`) and `optimizer.apply_gradients`.

The loss is averaged over the global batch exactly once: Keras losses
divide their per-replica mean by the number of replicas when they run in a
replica context, and `apply_gradients` sums the replicas' gradients, so the
step adds no scaling of its own (tests/training/test_distributed.py checks
that two replicas train to the weights of one process on the same global
batch).

`strategy_from_environment()` picks the strategy: `TF_CONFIG` naming more
than one task -> `MultiWorkerMirroredStrategy`; several GPUs ->
`MirroredStrategy`; else the default strategy.  Each worker reads its own
shard of the data (`shard_items`, by utterance, before any audio is
decoded).
"""

import json
import os
import time

import tensorflow as tf
from absl import logging

TF_CONFIG = "TF_CONFIG"


class ClusterConfigError(ValueError):
    """TF_CONFIG does not describe a usable cluster."""


def cluster_from_environment(environ=None):
    """The cluster `TF_CONFIG` describes, checked: (cluster dict, task type,
    task index), or None when TF_CONFIG is unset or empty.

    Raises:
      ClusterConfigError: TF_CONFIG is not JSON, lacks "cluster" or "task",
        names a task that is not in the cluster, lists an address twice, or
        has an address that is not host:port; the message says which.
    """
    text = (os.environ if environ is None else environ).get(TF_CONFIG, "")
    if not text.strip():
        return None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as e:
        raise ClusterConfigError(
            f"{TF_CONFIG} is not valid JSON ({e}): {text!r}"
        ) from e
    if not isinstance(config, dict):
        raise ClusterConfigError(f"{TF_CONFIG} must be a JSON object, got {text!r}")
    cluster, task = config.get("cluster"), config.get("task")
    if not isinstance(cluster, dict) or not cluster:
        raise ClusterConfigError(
            f'{TF_CONFIG} needs "cluster": {{"worker": ["host:port", ...]}}, '
            f"got {text!r}"
        )
    if not isinstance(task, dict) or "type" not in task or "index" not in task:
        raise ClusterConfigError(
            f'{TF_CONFIG} needs "task": {{"type": "worker", "index": i}}, got {text!r}'
        )
    seen = {}
    for job, addresses in cluster.items():
        if not isinstance(addresses, list) or not addresses:
            raise ClusterConfigError(
                f'{TF_CONFIG}: cluster["{job}"] must be a non-empty list of '
                f"host:port addresses, got {addresses!r}"
            )
        for i, address in enumerate(addresses):
            host, _, port = str(address).rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ClusterConfigError(
                    f'{TF_CONFIG}: cluster["{job}"][{i}] = {address!r} is not host:port'
                )
            if address in seen:
                raise ClusterConfigError(
                    f"{TF_CONFIG} names {address} twice: as {seen[address]} "
                    f"and as {job} {i}"
                )
            seen[address] = f"{job} {i}"
    job, index = task["type"], task["index"]
    if (
        job not in cluster
        or not isinstance(index, int)
        or not 0 <= index < len(cluster[job])
    ):
        raise ClusterConfigError(
            f"{TF_CONFIG}: task {job!r} {index!r} is not in the cluster "
            f"{ {name: len(a) for name, a in cluster.items()} }"
        )
    return cluster, job, index


def strategy_from_environment(timeout_seconds=60.0):
    """The strategy for this process: MultiWorkerMirroredStrategy when
    TF_CONFIG names more than one task (collectives time out after
    `timeout_seconds` instead of hanging on a peer that never answers),
    MirroredStrategy over several GPUs, else the default strategy."""
    found = cluster_from_environment()
    if found is not None and sum(len(a) for a in found[0].values()) > 1:
        options = tf.distribute.experimental.CommunicationOptions(
            timeout_seconds=timeout_seconds
        )
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    if len(tf.config.list_logical_devices("GPU")) > 1:
        return tf.distribute.MirroredStrategy()
    return tf.distribute.get_strategy()


def is_chief(strategy):
    """Whether this worker logs and writes (worker 0, or the chief task)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def shard_items(items, num_shards, index):
    """Items index, index + num_shards, ...: worker `index`'s share of a
    manifest, taken before anything is decoded.  Disjoint across workers,
    and together they hold every item once."""
    if num_shards < 1 or not 0 <= index < num_shards:
        raise ValueError(
            f"shard index must lie in [0, num_shards), got index={index}, "
            f"num_shards={num_shards}"
        )
    return list(items)[index::num_shards]


def _step_function(model):
    """One replica's step: (x, y) -> the replica's loss before Keras'
    division by the number of replicas (for logging)."""
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


def train_loop(
    model,
    dataset_fn,
    epochs,
    steps_per_epoch,
    strategy=None,
    log_every=10,
):
    """Trains a compiled model for `epochs` epochs of `steps_per_epoch`
    steps; returns the mean loss of each epoch (reduced across workers).

    Args:
      model: a Keras model built and compiled under `strategy.scope()`, whose
        `compute_loss(x, y, y_pred, training)` gives the loss (all of ours).
      dataset_fn: `tf.distribute.InputContext -> tf.data.Dataset` of
        (x, y) batches of `input_context.get_per_replica_batch_size(global)`
        items, read from this worker's shard (`input_context.input_pipeline_id`
        of `input_context.num_input_pipelines`); repeated as needed.
      epochs, steps_per_epoch: positive ints.
      strategy: default: `strategy_from_environment()`.
      log_every: steps between progress lines (chief only; 0: none).
    """
    for name, value in (("epochs", epochs), ("steps_per_epoch", steps_per_epoch)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if model.optimizer is None:
        raise ValueError("compile the model (with an optimizer and our loss) first")
    strategy = strategy or strategy_from_environment()
    chief = is_chief(strategy)
    dataset = strategy.distribute_datasets_from_function(dataset_fn)
    step = _step_function(model)

    @tf.function
    def distributed_step(batch):
        x, y = batch
        losses = strategy.run(step, args=(x, y))
        # Each replica's loss is already divided by the number of replicas.
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    history = []
    iterator = iter(dataset)
    for epoch in range(epochs):
        total, start = 0.0, time.time()
        for i in range(steps_per_epoch):
            loss = float(distributed_step(next(iterator)))
            total += loss
            if chief and log_every and (i + 1) % log_every == 0:
                logging.info(
                    "epoch %d step %d/%d: loss %.4f",
                    epoch + 1,
                    i + 1,
                    steps_per_epoch,
                    loss,
                )
        history.append(total / steps_per_epoch)
        if chief:
            logging.info(
                "epoch %d: loss %.4f (%.1f s)",
                epoch + 1,
                history[-1],
                time.time() - start,
            )
    return history
