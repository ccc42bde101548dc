# SPDX-License-Identifier: Apache-2.0
"""What the layers share: list lengths, traced output specs, output shapes.

The argument checks themselves are `tf_transducer._checks`'s.
"""

import keras
import tensorflow as tf


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

    def compute_output_spec(self, *args, **kwargs):
        return keras.Operation.compute_output_spec(self, *args, **kwargs)


def ceil_div(size, divisor):
    """ceil(size / divisor) of a static dimension; None stays None."""
    return None if size is None else -(-size // divisor)
