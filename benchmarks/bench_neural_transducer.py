# SPDX-License-Identifier: Apache-2.0
"""Benchmark of the Neural Transducer's alignment search and training.

1. The best-alignment search at B=16, 50 blocks, W=8, 120 targets (33
   outputs): `best_block_alignment` (in the graph, the batch at once, one
   tf.scan over blocks) against the same dynamic programme written as a
   per-sequence Python loop over blocks, end positions and counts (what a
   py_func implementation such as RETURNN's does), on the same scores;
   both give the same alignments (checked).
2. Training steps per second on the copy task of the tests (batch 32,
   16 frames, blocks of 4, W=4, 16 LSTM units).

2 threads. Usage: python -m benchmarks.bench_neural_transducer [--rounds 5]
"""

import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app  # noqa: E402
from absl import flags  # noqa: E402

ROUNDS = flags.DEFINE_integer("rounds", 5, "Timings per case.", lower_bound=3)

B, NB, W, U, V, E = 16, 50, 8, 120, 33, 0


def python_loop_alignment(lp, labels, label_lengths, num_blocks):
    """The same DP, one sequence at a time, in plain Python over numpy."""
    counts = np.zeros((len(lp), lp.shape[1]), np.int64)
    for b in range(len(lp)):
        y, L = labels[b], int(label_lengths[b])
        dp = [0.0] + [-np.inf] * L
        pointers = []
        for blk in range(int(num_blocks[b])):
            new, best = [-np.inf] * (L + 1), [0] * (L + 1)
            for end in range(L + 1):
                for n in range(min(W - 1, end) + 1):
                    s = end - n
                    if dp[s] == -np.inf:
                        continue
                    score = dp[s]
                    for k in range(n):
                        score += lp[b, blk, s + k, k, y[s + k]]
                    score += lp[b, blk, end, n, E]
                    if score > new[end]:
                        new[end], best[end] = score, n
            dp = new
            pointers.append(best)
        end = L
        for blk in reversed(range(int(num_blocks[b]))):
            counts[b, blk] = pointers[blk][end]
            end -= counts[b, blk]
    return counts


def alignment_case():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(B, NB, U + 1, W, V)).astype(np.float32)
    lp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    labels = rng.integers(1, V, size=(B, U)).astype(np.int32)
    label_lengths = rng.integers(U // 2, U + 1, size=B).astype(np.int32)
    label_lengths[0] = U
    num_blocks = rng.integers(NB // 2 + 10, NB + 1, size=B).astype(np.int32)
    num_blocks[0] = NB
    return lp, labels, label_lengths, num_blocks


def time_it(fn, rounds):
    fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def main(argv):
    del argv
    tf.config.threading.set_intra_op_parallelism_threads(2)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    from tf_transducer.ops.neural_transducer import best_block_alignment

    lp, labels, label_lengths, num_blocks = alignment_case()
    args = [tf.constant(x) for x in (lp, labels, label_lengths, num_blocks)]

    @tf.function
    def in_graph():
        return best_block_alignment(*args, W, E)

    counts = in_graph()[0].numpy()
    loop_counts = python_loop_alignment(lp, labels, label_lengths, num_blocks)
    assert (counts == loop_counts).all(), "the two searches disagree"
    graph_s = time_it(lambda: in_graph()[0].numpy(), ROUNDS.value * 4)
    loop_s = time_it(
        lambda: python_loop_alignment(lp, labels, label_lengths, num_blocks),
        ROUNDS.value,
    )
    print(f"# alignment search, B={B} blocks={NB} W={W} U={U} V={V}, 2 threads")
    print(f"in-graph batched (tf.function)  {graph_s * 1e3:9.2f} ms")
    print(f"per-sequence Python loop        {loop_s * 1e3:9.2f} ms")
    print(f"loop / in-graph: {loop_s / graph_s:.1f}x")

    # The copy task and model of the tests (tests/models/test_neural_transducer.py).
    from tests.models import test_neural_transducer as toy

    model = toy.copy_model()
    x, y, _ = toy.copy_task(32 * 20, 1)
    model.fit(x, y, batch_size=32, epochs=1, verbose=0)  # tracing
    per_epoch = time_it(
        lambda: model.fit(x, y, batch_size=32, epochs=1, verbose=0), ROUNDS.value
    )
    print(f"# copy task training, batch 32: {20 / per_epoch:.1f} steps/s")
    return 0


if __name__ == "__main__":
    app.run(main)
