"""Custom TensorFlow ops and their pure-TensorFlow equivalents."""

from tf_transducer.ops._loader import OpLibraryError
from tf_transducer.ops.mutual_information import (
    in_xla_context,
    mutual_information_recursion,
)
from tf_transducer.ops.mutual_information_tf import mutual_information_recursion_tf
from tf_transducer.ops.rnnt import (
    get_rnnt_logprobs,
    get_rnnt_logprobs_joint,
    rnnt_loss,
    rnnt_loss_simple,
)

__all__ = [
    "OpLibraryError",
    "get_rnnt_logprobs",
    "get_rnnt_logprobs_joint",
    "in_xla_context",
    "mutual_information_recursion",
    "mutual_information_recursion_tf",
    "rnnt_loss",
    "rnnt_loss_simple",
]
