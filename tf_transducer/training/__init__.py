# SPDX-License-Identifier: Apache-2.0
"""Training runs: run folders and a training loop for any tf.distribute strategy.

Run folders resume, refuse or start over; the loop runs on several machines
too.
"""

from tf_transducer.training.distributed import (
    DISTRIBUTIONS,
    ClusterConfigError,
    all_reduce_sums,
    cluster_from_environment,
    is_chief,
    shard_items,
    strategy_from_environment,
    worker_position,
)
from tf_transducer.training.loop import (
    PREEMPTED_EXIT_CODE,
    loss_sums,
    model_description,
    train_loop,
)
from tf_transducer.training.run_dir import RunDirectory, RunStateCallback

__all__ = [
    "DISTRIBUTIONS",
    "PREEMPTED_EXIT_CODE",
    "ClusterConfigError",
    "RunDirectory",
    "RunStateCallback",
    "all_reduce_sums",
    "cluster_from_environment",
    "is_chief",
    "loss_sums",
    "model_description",
    "shard_items",
    "strategy_from_environment",
    "train_loop",
    "worker_position",
]
