"""tf_transducer: transducer losses as TensorFlow custom ops, for Keras 3.

The public API; everything else is internal.
"""

from tf_transducer.ops import (
    OpLibraryError,
    get_rnnt_logprobs,
    get_rnnt_logprobs_joint,
    mutual_information_recursion,
    mutual_information_recursion_tf,
    rnnt_loss,
    rnnt_loss_simple,
)

__version__ = "0.1.0"

__all__ = [
    "OpLibraryError",
    "get_rnnt_logprobs",
    "get_rnnt_logprobs_joint",
    "mutual_information_recursion",
    "mutual_information_recursion_tf",
    "rnnt_loss",
    "rnnt_loss_simple",
]
