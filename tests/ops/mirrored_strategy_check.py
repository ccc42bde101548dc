# SPDX-License-Identifier: Apache-2.0
"""Run by test_mutual_information_integration.py in a fresh interpreter.

Splits the CPU into two logical devices, then (1) runs the MI op per replica
under MirroredStrategy and checks the summed scores and gradients against one
device, and (2) trains a small Keras model with `fit` under the strategy.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(__file__))))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2
)

import keras  # noqa: E402

import tf_transducer as tt  # noqa: E402
from tests.ops.test_mutual_information_integration import make_model  # noqa: E402

strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
rng = np.random.default_rng(0)
px = rng.normal(size=(4, 3, 6))
py = rng.normal(size=(4, 4, 5))


def loss_and_grads(px, py):
    with tf.GradientTape() as tape:
        tape.watch([px, py])
        loss = tf.reduce_sum(tt.mutual_information_recursion(px, py))
    return loss, tape.gradient(loss, [px, py])


dataset = tf.data.Dataset.from_tensor_slices((px, py)).batch(4)
dist = strategy.experimental_distribute_dataset(dataset)
for batch in dist:
    per_replica = strategy.run(loss_and_grads, args=batch)
loss = strategy.reduce("SUM", per_replica[0], axis=None)
want_loss, (want_px, want_py) = loss_and_grads(tf.constant(px), tf.constant(py))
np.testing.assert_allclose(loss.numpy(), want_loss.numpy(), rtol=1e-12)
got_px = np.concatenate(
    [t.numpy() for t in strategy.experimental_local_results(per_replica[1][0])]
)
np.testing.assert_allclose(got_px, want_px.numpy(), rtol=1e-12)

with strategy.scope():
    keras.utils.set_random_seed(1)
    model = make_model()
    model.compile(
        optimizer=keras.optimizers.Adam(0.05), loss=lambda y_true, y_pred: -y_pred
    )
x = rng.normal(size=(32, 8)).astype(np.float32)
losses = model.fit(x, np.zeros(32), batch_size=8, epochs=4, verbose=0).history["loss"]
assert np.all(np.isfinite(losses)) and losses[-1] < 0.5 * losses[0], losses
print(f"replicas={strategy.num_replicas_in_sync} losses={losses}")
