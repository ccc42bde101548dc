# SPDX-License-Identifier: Apache-2.0
"""What the layers share: list lengths, traced output specs, output shapes.

The argument checks themselves are `tf_transducer._checks`'s.
"""

from collections.abc import Sequence
from typing import Any
from typing import TypeAlias

import keras
import tensorflow as tf

# A shape Keras passes to build / compute_output_shape (a tuple, a list or a
# TensorShape), and the shape a layer reports.
Shape: TypeAlias = Sequence[int | None]
OutputShape: TypeAlias = tuple[int | None, ...]


class ListLengths:
    """Mixin for (values, lengths) layers: lengths may be a Python list or tuple.

    Keras takes only tensors as positional arguments.
    """

    def __call__(self, values, *args, **kwargs):
        if args and isinstance(args[0], (list, tuple)):
            args = (tf.convert_to_tensor(args[0]), *args[1:])
        if isinstance(kwargs.get("lengths"), (list, tuple)):
            kwargs["lengths"] = tf.convert_to_tensor(kwargs["lengths"])
        return super().__call__(values, *args, **kwargs)


class TracedOutputSpec:
    """Mixin: symbolic calls trace `call`, though the layer has compute_output_shape.

    Keras would otherwise make the symbolic outputs from compute_output_shape:
    all in the compute dtype (int32 lengths as floats), and calling it with
    keywords named after `call`'s arguments, where a layer without a `build`
    of its own must take `input_shape` (what Keras's summary passes it).
    """

    def compute_output_spec(self, *args: Any, **kwargs: Any) -> Any:
        return keras.Operation.compute_output_spec(self, *args, **kwargs)


def ceil_div(size: int | None, divisor: int) -> int | None:
    """ceil(size / divisor) of a static dimension; None stays None."""
    return None if size is None else -(-size // divisor)
