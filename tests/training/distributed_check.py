# SPDX-License-Identifier: Apache-2.0
"""Run as a script (tests/training/test_distributed.py starts it): trains a
small model through `train_loop` on fixed data and writes the last epoch's
loss and validation loss, then the weights, to OUT (.npy, chief only).

  distributed_check.py MODE OUT MODEL [key=value ...]

MODE: "single" (one process), "mirrored" (2 logical CPUs) or "worker" (this
process's task of TF_CONFIG: MultiWorkerMirroredStrategy).  MODEL:
"transducer" (the C++ RnntLoss) or "deepspeech" (CtcLoss).  Options:
epochs, steps (per epoch), ckpt (checkpoint folder), augment=1 (SpecAugment
on: draws from the model's seed generator), dtype=float64 (Keras' floatx),
and die=SIGNAL:EPOCH:ITEM:MARK: this worker (worker 1, or the single
process) sends itself SIGNAL ("KILL" or "TERM") when its input pipeline
reads item ITEM of epoch EPOCH, once (MARK is a file created then).

Every variant sees the same global batches: epoch e shuffles a pool of
utterances with seed e, step i takes the next GLOBAL_BATCH of them, and the
replicas (or workers) each take their share.
"""

import os
import signal
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

MODE, OUT, MODEL = sys.argv[1:4]
OPTIONS = dict(arg.split("=", 1) for arg in sys.argv[4:])
EPOCHS, STEPS = int(OPTIONS.get("epochs", 1)), int(OPTIONS.get("steps", 3))
if MODE == "mirrored":
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2
    )

from tf_transducer.layers import PredictionNetwork  # noqa: E402
from tf_transducer.layers import TransducerEncoder  # noqa: E402
from tf_transducer.layers import TransducerJoiner  # noqa: E402
from tf_transducer.losses import CtcLoss  # noqa: E402
from tf_transducer.losses import RnntLoss  # noqa: E402
from tf_transducer.models import DeepSpeech  # noqa: E402
from tf_transducer.models import Transducer  # noqa: E402
from tf_transducer.training import distributed  # noqa: E402
from tf_transducer.training import loss_sums  # noqa: E402
from tf_transducer.training import train_loop  # noqa: E402

GLOBAL_BATCH, POOL = 4, 16
rng = np.random.default_rng(0)
DTYPE = OPTIONS.get("dtype", "float32")
keras.config.set_floatx(DTYPE)
X = rng.normal(size=(POOL, 12, 6)).astype(DTYPE)
N = rng.integers(6, 13, size=POOL).astype(np.int32)
Y = np.full((POOL, 3), -1, np.int32)
for i, n in enumerate(rng.integers(1, 4, size=POOL)):
    Y[i, :n] = rng.integers(1, 7, size=n)

if MODE == "worker":
    strategy = distributed.strategy_from_environment(timeout_seconds=20)
elif MODE == "mirrored":
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
else:
    strategy = tf.distribute.get_strategy()
worker, workers = distributed.worker_position(strategy)


def die(epoch, item):
    """Sends this process the signal of the `die` option at its item."""
    name, at_epoch, at_item, mark = OPTIONS["die"].split(":")
    if (epoch, item) == (int(at_epoch), int(at_item)) and not os.path.exists(mark):
        open(mark, "w").close()
        os.kill(os.getpid(), getattr(signal, f"SIG{name}"))
    return item


def dataset_fn(context, epoch):
    # This input pipeline's share of each global batch of the epoch.
    per_replica = context.get_per_replica_batch_size(GLOBAL_BATCH)
    pipelines, pipeline = context.num_input_pipelines, context.input_pipeline_id
    order = np.random.default_rng(epoch).permutation(POOL)
    steps = order[: STEPS * GLOBAL_BATCH].reshape(STEPS, GLOBAL_BATCH)
    take = np.concatenate(
        [distributed.shard_items(row, pipelines, pipeline) for row in steps]
    )
    items = tf.data.Dataset.from_tensor_slices(take)
    if "die" in OPTIONS and (worker == 1 or workers == 1):
        items = items.enumerate().map(
            lambda i, item: tf.ensure_shape(
                tf.numpy_function(
                    lambda i, item: die(epoch, int(i)) * 0 + item, [i, item], tf.int64
                ),
                [],
            )
        )
    data = items.map(lambda i: ((tf.gather(X, i), tf.gather(N, i)), tf.gather(Y, i)))
    return data.batch(per_replica)


def validation(model, worker, workers):
    # Uneven shards of 5 utterances (3 + 2 on two workers), batches of 2.
    take = distributed.shard_items(range(5), workers, worker)
    data = tf.data.Dataset.from_tensor_slices(((X[take], N[take]), Y[take]))
    return loss_sums(model, data.batch(2))


with strategy.scope():
    keras.utils.set_random_seed(0)
    if MODEL == "transducer":
        augment = dict(freq_mask_max_bins=2, time_mask_max_frames=3)
        augment = augment if OPTIONS.get("augment") else None
        model = Transducer(
            7,
            TransducerEncoder(units=8),
            PredictionNetwork(7, embedding_dim=4, units=8),
            TransducerJoiner(7, units=8),
            feature_dim=6,
            augment=augment,
        )
        loss = RnntLoss()
    else:  # no dropout: the replicas would draw different masks
        model = DeepSpeech(num_classes=7, n_hidden=16, n_context=2, n_input=6,
                           dropout_rate=0.0)  # fmt: skip
        loss = CtcLoss()
    model.build()
    model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.5), loss=loss)
initial = np.concatenate([w.numpy().ravel() for w in model.weights])
history = train_loop(
    model,
    dataset_fn,
    epochs=EPOCHS,
    steps_per_epoch=STEPS,
    strategy=strategy,
    checkpoint_dir=OPTIONS.get("ckpt"),
    save_every=2,
    validation=validation,
    log_every=0,
)
weights = np.concatenate([w.numpy().ravel() for w in model.weights])
losses = history.get("loss", [])
# A step that trained nothing would make every variant agree.
assert np.all(np.isfinite(losses)) and np.abs(weights - initial).max() > 1e-3, (
    losses,
    np.abs(weights - initial).max(),
)
if distributed.is_chief(strategy):
    np.save(OUT, np.concatenate([[losses[-1], history["val_loss"][-1]], weights]))
print("done", losses)
