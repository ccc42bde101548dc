# SPDX-License-Identifier: Apache-2.0
"""recognize: the best label sequence of any of the package's models, greedily."""

from typing import Any

import numpy as np

from tf_transducer.decoding.ctc import ctc_greedy_decode
from tf_transducer.decoding.neural_transducer import neural_transducer_greedy_decode
from tf_transducer.decoding.transducer import transducer_greedy_decode
from tf_transducer.models import DeepSpeech
from tf_transducer.models import LatticeModel
from tf_transducer.models import NeuralTransducerModel
from tf_transducer.models import Transducer


def recognize(model: Any, inputs: Any) -> list[list[int]]:
    """B label lists of a model's inputs, by its own greedy search.

    - `Transducer`: greedy search (`transducer_greedy_decode`);
    - `DeepSpeech`: the CTC best path of its logits (`ctc_greedy_decode`);
    - `NeuralTransducerModel`: block by block, each block's best outputs
      until <e> (`neural_transducer_greedy_decode`);
    - `LatticeModel`: the labels (blanks dropped) on the lattice's best path.

    Args:
      model: one of the models above, built (trained or loaded).
      inputs: what the model takes: values [B, T, ...], (values, lengths
        [B]) or a dict.

    Returns:
      B lists of label ids. Eager only.
    """
    if isinstance(model, Transducer):
        return transducer_greedy_decode(model, inputs)
    if isinstance(model, DeepSpeech):
        logits = model(inputs, training=False)
        return ctc_greedy_decode(logits, model.frame_lengths(inputs))
    if isinstance(model, NeuralTransducerModel):
        out = model(inputs, training=False)
        return neural_transducer_greedy_decode(
            model.transducer, out["encoder"], out["lengths"]
        )
    if isinstance(model, LatticeModel):
        out = model(inputs, training=False)
        aligned, count, _ = model.lattice.shortest_path(
            out["frames"], out["num_frames"]
        )
        return [
            [int(y) for y in row[:n] if y]
            for row, n in zip(np.asarray(aligned), np.asarray(count), strict=True)
        ]
    raise ValueError(
        "model must be a Transducer, DeepSpeech, NeuralTransducerModel or "
        f"LatticeModel, got {type(model).__name__}"
    )
