"""Custom TensorFlow ops and their pure-TensorFlow equivalents."""

from tf_transducer.ops._loader import OpLibraryError
from tf_transducer.ops.mutual_information import (
    in_xla_context,
    mutual_information_recursion,
)
from tf_transducer.ops.mutual_information_tf import mutual_information_recursion_tf

__all__ = [
    "OpLibraryError",
    "in_xla_context",
    "mutual_information_recursion",
    "mutual_information_recursion_tf",
]
