"""Run as a script (tests/training/test_distributed.py starts it): trains a
small model through `train_loop` for a few steps on fixed data and writes
the final loss and weights to OUT (.npy).  MODEL: "transducer" (the C++
RnntLoss) or "deepspeech" (CtcLoss).

  distributed_check.py single OUT MODEL     one process, default strategy
  distributed_check.py mirrored OUT MODEL   2 logical CPUs, MirroredStrategy
  distributed_check.py worker OUT MODEL     this process's task of TF_CONFIG
                                            (MultiWorkerMirroredStrategy);
                                            the chief writes OUT

Every variant sees the same global batch of 4 utterances per step: the
replicas (or workers) each take their shard of it.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

MODE, OUT, MODEL = sys.argv[1:4]
if MODE == "mirrored":
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2
    )

from tf_transducer.losses import CtcLoss, RnntLoss  # noqa: E402
from tf_transducer.models import DeepSpeech, Transducer  # noqa: E402
from tf_transducer.training import distributed  # noqa: E402

GLOBAL_BATCH, STEPS = 4, 3
rng = np.random.default_rng(0)
X = rng.normal(size=(GLOBAL_BATCH, 12, 6)).astype(np.float32)
N = np.array([12, 9, 12, 6], np.int32)
Y = np.array([[1, 2, 3], [4, 5, -1], [6, -1, -1], [2, 2, -1]], np.int32)

if MODE == "worker":
    strategy = distributed.strategy_from_environment(timeout_seconds=60)
elif MODE == "mirrored":
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
else:
    strategy = tf.distribute.get_strategy()


def dataset_fn(context):
    # This input pipeline's share of each global batch, the same every step.
    per_replica = context.get_per_replica_batch_size(GLOBAL_BATCH)
    pipelines, pipeline = context.num_input_pipelines, context.input_pipeline_id
    replicas_here = context.num_replicas_in_sync // pipelines
    take = distributed.shard_items(range(GLOBAL_BATCH), pipelines, pipeline)
    data = tf.data.Dataset.from_tensor_slices(((X[take], N[take]), Y[take]))
    assert per_replica * replicas_here == len(take)
    return data.batch(per_replica).repeat()


with strategy.scope():
    keras.utils.set_random_seed(0)
    if MODEL == "transducer":
        model = Transducer(7, feature_dim=6, encoder_units=8, predictor_units=8,
                           joiner_units=8, embedding_dim=4)  # fmt: skip
        loss = RnntLoss()
    else:  # no dropout: the replicas would draw different masks
        model = DeepSpeech(num_classes=7, n_hidden=16, n_context=2, n_input=6,
                           dropout_rate=0.0)  # fmt: skip
        loss = CtcLoss()
    model.build()
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss)
initial = np.concatenate([w.numpy().ravel() for w in model.weights])
history = distributed.train_loop(model, dataset_fn, epochs=1, steps_per_epoch=STEPS,
                                 strategy=strategy, log_every=0)  # fmt: skip
weights = np.concatenate([w.numpy().ravel() for w in model.weights])
# A step that trained nothing would make every variant agree.
assert np.isfinite(history[0]) and np.abs(weights - initial).max() > 1e-3, (
    history,
    np.abs(weights - initial).max(),
)
if distributed.is_chief(strategy):
    np.save(OUT, np.concatenate([[history[0]], weights]))
print("done", history[0])
