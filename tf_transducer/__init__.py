"""tf_transducer: transducer losses as TensorFlow custom ops, for Keras 3.

The public API; everything else is internal.
"""

from tf_transducer.ops import (
    OpLibraryError,
    mutual_information_recursion,
    mutual_information_recursion_tf,
)

__version__ = "0.1.0"

__all__ = [
    "OpLibraryError",
    "mutual_information_recursion",
    "mutual_information_recursion_tf",
]
