# SPDX-License-Identifier: Apache-2.0
"""Run as a script: one Transducer training step on 2 logical CPUs under
MirroredStrategy vs on one device; prints the two losses and the largest
difference of the updated weights."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2
)

from tf_transducer.layers import PredictionNetwork  # noqa: E402
from tf_transducer.layers import TransducerEncoder  # noqa: E402
from tf_transducer.layers import TransducerJoiner  # noqa: E402
from tf_transducer.losses import RnntLoss  # noqa: E402
from tf_transducer.models import Transducer  # noqa: E402


def make(strategy):
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = Transducer(
            7,
            TransducerEncoder(units=8),
            PredictionNetwork(7, embedding_dim=4, units=8),
            TransducerJoiner(7, units=8),
            feature_dim=6,
        )
        model.build()
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss=RnntLoss())
    return model


rng = np.random.default_rng(0)
x = rng.normal(size=(4, 12, 6)).astype(np.float32)
n = np.array([12, 9, 12, 6], np.int32)
y = np.array([[1, 2, 3], [4, 5, -1], [6, -1, -1], [2, 2, -1]], np.int32)
results = []
for strategy in (tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]),
                 tf.distribute.OneDeviceStrategy("/cpu:0")):  # fmt: skip
    model = make(strategy)
    data = tf.data.Dataset.from_tensor_slices(((x, n), y)).batch(4)
    loss = model.fit(data, epochs=1, verbose=0).history["loss"][0]
    results.append((loss, np.concatenate([w.numpy().ravel() for w in model.weights])))
print(results[0][0], results[1][0], np.abs(results[0][1] - results[1][1]).max())
