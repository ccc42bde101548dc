# SPDX-License-Identifier: Apache-2.0
"""Clusters and strategies: the strategy, the data share, sums across workers.

Which strategy this process trains under, which share of the data it reads,
and sums across workers.

`strategy_from_environment()` picks the strategy: `TF_CONFIG` naming more
than one task -> `MultiWorkerMirroredStrategy`; several GPUs ->
`MirroredStrategy`; else the default strategy.  Each worker reads its own
shard of the data (`shard_items`, by utterance, before any audio is
decoded).  The training loop itself is `tf_transducer.training.train_loop`.
"""

import json
import os
from collections.abc import Iterable
from collections.abc import Mapping
from typing import TypeVar

import numpy as np
import tensorflow as tf
from numpy.typing import ArrayLike

TF_CONFIG = "TF_CONFIG"
T = TypeVar("T")


class ClusterConfigError(ValueError):
    """TF_CONFIG does not describe a usable cluster."""


def cluster_from_environment(
    environ: Mapping[str, str] | None = None,
) -> tuple[dict[str, list[str]], str, int] | None:
    """The cluster `TF_CONFIG` describes, checked.

    Returns (cluster dict, task type, task index), or None when TF_CONFIG is
    unset or empty.

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
    seen: dict[str, str] = {}
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


DISTRIBUTIONS = ("auto", "none", "mirrored", "multi_worker")


def strategy_from_environment(
    distribution: str = "auto", timeout_seconds: float = 60.0
) -> tf.distribute.Strategy:
    """The strategy for this process.

    Args:
      distribution: "auto": MultiWorkerMirroredStrategy when TF_CONFIG names
        more than one task, MirroredStrategy over several GPUs, else the
        default strategy; "none": the default strategy (one device);
        "mirrored": MirroredStrategy over this machine's GPUs (or its CPU);
        "multi_worker": MultiWorkerMirroredStrategy (TF_CONFIG required).
      timeout_seconds: collectives (all-reduces) fail after this long
        instead of hanging on a worker that never answers.

    Raises:
      ValueError: an unknown distribution, or "multi_worker" without a
        TF_CONFIG; ClusterConfigError: a malformed TF_CONFIG.
    """
    if distribution not in DISTRIBUTIONS:
        raise ValueError(
            f"distribution must be one of {', '.join(DISTRIBUTIONS)}, "
            f"got {distribution!r}"
        )
    found = cluster_from_environment()
    several = found is not None and sum(len(a) for a in found[0].values()) > 1
    if distribution == "multi_worker" and found is None:
        raise ValueError(
            f'distribution "multi_worker" needs {TF_CONFIG} (the cluster and '
            "this worker's task); it is not set"
        )
    if distribution == "multi_worker" or (distribution == "auto" and several):
        options = tf.distribute.experimental.CommunicationOptions(
            timeout_seconds=timeout_seconds
        )
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    gpus = tf.config.list_logical_devices("GPU")
    if distribution == "mirrored" or (distribution == "auto" and len(gpus) > 1):
        return tf.distribute.MirroredStrategy()
    return tf.distribute.get_strategy()


def worker_position(strategy: tf.distribute.Strategy) -> tuple[int, int]:
    """(this worker's index, number of workers); (0, 1) on one machine."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().jobs:
        return 0, 1
    spec = resolver.cluster_spec()
    jobs = [job for job in ("chief", "worker") if job in spec.jobs]
    tasks = [(job, i) for job in jobs for i in range(spec.num_tasks(job))]
    return tasks.index((resolver.task_type, resolver.task_id)), len(tasks)


def all_reduce_sums(strategy: tf.distribute.Strategy, values: ArrayLike) -> np.ndarray:
    """Element-wise sums over the workers of float64 `values`.

    `values` is a 1-D array of the same length on every worker; every worker
    gets the totals.
    """
    values = np.asarray(values, np.float64)
    local = strategy.num_replicas_in_sync // worker_position(strategy)[1]

    def value_fn(context):
        # One replica per worker carries the values.
        first = context.replica_id_in_sync_group % local == 0
        return tf.constant(values if first else np.zeros_like(values))

    per_replica = strategy.experimental_distribute_values_from_function(value_fn)
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None).numpy()


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this worker logs and writes (worker 0, or the chief task)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def shard_items(items: Iterable[T], num_shards: int, index: int) -> list[T]:
    """Items index, index + num_shards, ...: worker `index`'s share of a manifest.

    Taken before anything is decoded.  Disjoint across workers, and together
    they hold every item once.
    """
    if num_shards < 1 or not 0 <= index < num_shards:
        raise ValueError(
            f"shard index must lie in [0, num_shards), got index={index}, "
            f"num_shards={num_shards}"
        )
    return list(items)[index::num_shards]
