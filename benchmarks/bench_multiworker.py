# SPDX-License-Identifier: Apache-2.0
"""Transducer training step: one process vs a 2-worker cluster on this
machine (MultiWorkerMirroredStrategy over gRPC on 127.0.0.1), through
`train_loop`, on the same global batch; and the gradient all-reduce volume,
with an estimate of the ring all-reduce time across N hosts.

Usage: python -m benchmarks.bench_multiworker [--steps 6] [--epochs 3]

Each variant runs `epochs` epochs of `steps` steps; the first epoch (tracing)
is left out; the step time is the median epoch time / steps. The model is the
demo's size class (log-mel 80, 2 x 256 LSTM encoder, joiner 128, 30 units),
global batch 16 of 3 s (300 frames), 30 labels.
"""

import argparse
import json
import os
import subprocess
import time

from benchmarks import _harness

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

GLOBAL_BATCH, FRAMES, FEATURES, LABELS, VOCAB = 16, 300, 80, 30, 30


def worker(out, steps, epochs):
    """One process of a variant: trains, writes its epoch times to out."""
    import keras
    import numpy as np
    import tensorflow as tf

    from tf_transducer.losses import RnntLoss
    from tf_transducer.models import Transducer
    from tf_transducer.training import is_chief
    from tf_transducer.training import shard_items
    from tf_transducer.training import strategy_from_environment
    from tf_transducer.training import train_loop

    strategy = strategy_from_environment(timeout_seconds=120)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(GLOBAL_BATCH, FRAMES, FEATURES)).astype(np.float32)
    n = np.full([GLOBAL_BATCH], FRAMES, np.int32)
    y = rng.integers(1, VOCAB, size=(GLOBAL_BATCH, LABELS)).astype(np.int32)

    def dataset_fn(context, epoch):
        take = shard_items(
            range(GLOBAL_BATCH), context.num_input_pipelines, context.input_pipeline_id
        )
        per_replica = context.get_per_replica_batch_size(GLOBAL_BATCH)
        data = tf.data.Dataset.from_tensor_slices(((x[take], n[take]), y[take]))
        return data.batch(per_replica).repeat()

    class EpochTimes(keras.callbacks.Callback):
        times = []

        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.times.append(time.perf_counter() - self.start)

    with strategy.scope():
        keras.utils.set_random_seed(0)
        # The recipe's widths, with an LSTM prediction network and no
        # feature normalisation (as measured).
        model = Transducer.from_preset(
            "lstm-1m", VOCAB, predictor={"kind": "lstm"}, feature_dim=FEATURES
        )
        model.build()
        model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=RnntLoss())
    timer = EpochTimes()
    train_loop(model, dataset_fn, epochs, steps, strategy, callbacks=[timer],
               log_every=0, verbose=0)  # fmt: skip
    if is_chief(strategy):
        gradient_bytes = sum(
            int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize
            for v in model.trainable_variables
        )
        with open(out, "w") as f:
            json.dump({"epoch_times": timer.times, "gradient_bytes": gradient_bytes,
                       "parameters": model.count_params()}, f)  # fmt: skip


def run_variant(workers, steps, epochs, out):
    import socket

    sockets = [socket.socket() for _ in range(workers)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    processes = []
    for i in range(workers):
        env = dict(os.environ)
        if workers > 1:
            env["TF_CONFIG"] = json.dumps(
                {"cluster": cluster, "task": {"type": "worker", "index": i}}
            )
        argv = [*_harness.self_command(__spec__), "--worker", out,
                f"--steps={steps}", f"--epochs={epochs}"]  # fmt: skip
        processes.append(subprocess.Popen(argv, env=env))
    for p in processes:
        if p.wait(timeout=1800) != 0:
            raise SystemExit(f"a worker of the {workers}-worker run failed")
    with open(out) as f:
        return json.load(f)


def ring_seconds(gradient_bytes, hosts, gbit_per_s):
    """Ring all-reduce: each host sends and receives 2 (N - 1) / N of the
    gradient bytes; bandwidth-bound, latency left out."""
    return 2 * (hosts - 1) / hosts * gradient_bytes * 8 / (gbit_per_s * 1e9)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.steps, args.epochs)
        return
    import statistics
    import tempfile

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for workers in (1, 2):
            results[workers] = run_variant(
                workers, args.steps, args.epochs, os.path.join(tmp, f"{workers}.json")
            )
    step = {
        w: statistics.median(r["epoch_times"][1:]) / args.steps
        for w, r in results.items()
    }
    grad = results[1]["gradient_bytes"]
    print(f"model: {results[1]['parameters'] / 1e6:.2f} M parameters, "
          f"gradient {grad / 1e6:.2f} MB (float32) all-reduced per step")  # fmt: skip
    print(f"| workers | step (ms), global batch {GLOBAL_BATCH} | vs 1 process |")
    print("| --- | --- | --- |")
    for w in (1, 2):
        print(f"| {w} | {step[w] * 1e3:.0f} | {step[w] / step[1]:.2f}x |")
    print("\nEstimate (not measured): ring all-reduce of the float32 gradient")
    print("per step, bandwidth-bound (latency and overlap with compute left out)")
    print("| model | hosts | 25 Gb/s | 100 Gb/s |")
    print("| --- | --- | --- | --- |")
    sizes = [("this one", grad), ("30 M params", 30e6 * 4), ("120 M params", 120e6 * 4)]
    for name, size in sizes:
        for hosts in (2, 8, 16):
            print(f"| {name} | {hosts} | {ring_seconds(size, hosts, 25) * 1e3:.1f} ms "
                  f"| {ring_seconds(size, hosts, 100) * 1e3:.1f} ms |")  # fmt: skip


if __name__ == "__main__":
    main()
