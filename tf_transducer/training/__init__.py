"""Training runs: run folders that resume, refuse or start over, and a
training loop for any tf.distribute strategy (several machines included)."""

from tf_transducer.training.distributed import (
    ClusterConfigError,
    cluster_from_environment,
    is_chief,
    shard_items,
    strategy_from_environment,
    train_loop,
)
from tf_transducer.training.run_dir import RunDirectory, RunStateCallback

__all__ = [
    "ClusterConfigError",
    "RunDirectory",
    "RunStateCallback",
    "cluster_from_environment",
    "is_chief",
    "shard_items",
    "strategy_from_environment",
    "train_loop",
]
