# SPDX-License-Identifier: Apache-2.0
"""bench_lattice.py's worker for Google's LAST (run with a Python that has
last-asr, jax and flax; no TensorFlow). Same configuration and inputs.

Usage (by bench_lattice.py): python -m benchmarks.last_lattice_worker loss|shortest
"""

import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import last  # noqa: E402

from benchmarks import _harness  # noqa: E402
from benchmarks.lattice_case import CONTEXT  # noqa: E402
from benchmarks.lattice_case import HIDDEN  # noqa: E402
from benchmarks.lattice_case import RNN  # noqa: E402
from benchmarks.lattice_case import RNN_EMB  # noqa: E402
from benchmarks.lattice_case import V  # noqa: E402
from benchmarks.lattice_case import inputs  # noqa: E402


def main(case):
    lattice = last.RecognitionLattice(
        context=last.contexts.FullNGram(vocab_size=V, context_size=CONTEXT),
        alignment=last.alignments.FrameDependent(),
        weight_fn_cacher_factory=lambda context: last.weight_fns.SharedRNNCacher(
            vocab_size=V, context_size=CONTEXT, rnn_size=RNN, rnn_embedding_size=RNN_EMB
        ),
        weight_fn_factory=lambda context: last.weight_fns.JointWeightFn(
            vocab_size=V, hidden_size=HIDDEN
        ),
    )
    frames, num_frames, labels, num_labels = inputs()
    params = lattice.init(jax.random.PRNGKey(0), frames, num_frames, labels, num_labels)

    if case == "loss":

        @jax.jit
        def step(params):
            def total(p):
                return lattice.apply(p, frames, num_frames, labels, num_labels).sum()

            return jax.value_and_grad(total)(params)

    else:

        @jax.jit
        def step(params):
            return lattice.apply(
                params, frames, num_frames, method=lattice.shortest_path
            )

    def run():
        jax.block_until_ready(step(params))

    _harness.serve(run, report=lambda: {})


if __name__ == "__main__":
    main(sys.argv[1])
