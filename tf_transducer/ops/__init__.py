# SPDX-License-Identifier: Apache-2.0
"""Custom TensorFlow ops and their pure-TensorFlow equivalents."""

from tf_transducer.ops._loader import CpuGemmPaths
from tf_transducer.ops._loader import OpLibraryError
from tf_transducer.ops._loader import cpu_gemm_paths
from tf_transducer.ops.mutual_information import in_xla_context
from tf_transducer.ops.mutual_information import mutual_information_recursion
from tf_transducer.ops.mutual_information_tf import mutual_information_recursion_tf
from tf_transducer.ops.rnnt import get_rnnt_logprobs
from tf_transducer.ops.rnnt import get_rnnt_logprobs_joint
from tf_transducer.ops.rnnt import rnnt_loss
from tf_transducer.ops.rnnt import rnnt_loss_simple
from tf_transducer.ops.rnnt_joint import rnnt_loss_joint
from tf_transducer.ops.rnnt_pruned import do_rnnt_pruning
from tf_transducer.ops.rnnt_pruned import get_rnnt_logprobs_pruned
from tf_transducer.ops.rnnt_pruned import get_rnnt_prune_ranges
from tf_transducer.ops.rnnt_pruned import rnnt_loss_pruned
from tf_transducer.ops.rnnt_smoothed import get_rnnt_logprobs_smoothed
from tf_transducer.ops.rnnt_smoothed import rnnt_loss_smoothed
from tf_transducer.ops.tdt import tdt_loss
from tf_transducer.ops.tdt_joint import tdt_loss_joint
from tf_transducer.ops.tdt_pruned import get_tdt_prune_ranges
from tf_transducer.ops.tdt_pruned import tdt_loss_pruned
from tf_transducer.ops.tdt_simple import tdt_loss_simple

__all__ = [
    "CpuGemmPaths",
    "OpLibraryError",
    "cpu_gemm_paths",
    "do_rnnt_pruning",
    "get_rnnt_logprobs",
    "get_rnnt_logprobs_joint",
    "get_rnnt_logprobs_pruned",
    "get_rnnt_logprobs_smoothed",
    "get_rnnt_prune_ranges",
    "get_tdt_prune_ranges",
    "in_xla_context",
    "mutual_information_recursion",
    "mutual_information_recursion_tf",
    "rnnt_loss",
    "rnnt_loss_joint",
    "rnnt_loss_pruned",
    "rnnt_loss_simple",
    "rnnt_loss_smoothed",
    "tdt_loss",
    "tdt_loss_joint",
    "tdt_loss_pruned",
    "tdt_loss_simple",
]
