# SPDX-License-Identifier: Apache-2.0
"""Training runs: run folders and a training loop for any tf.distribute strategy.

Run folders resume, refuse or start over; the loop runs on several machines
too.
"""

from tf_transducer.training.distributed import DISTRIBUTIONS
from tf_transducer.training.distributed import ClusterConfigError
from tf_transducer.training.distributed import all_reduce_sums
from tf_transducer.training.distributed import cluster_from_environment
from tf_transducer.training.distributed import is_chief
from tf_transducer.training.distributed import shard_items
from tf_transducer.training.distributed import strategy_from_environment
from tf_transducer.training.distributed import worker_position
from tf_transducer.training.loop import PREEMPTED_EXIT_CODE
from tf_transducer.training.loop import loss_sums
from tf_transducer.training.loop import model_description
from tf_transducer.training.loop import train_loop
from tf_transducer.training.run_dir import RunDirectory
from tf_transducer.training.run_dir import RunStateCallback

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
