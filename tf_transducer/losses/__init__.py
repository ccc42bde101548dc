# SPDX-License-Identifier: Apache-2.0
"""Keras 3 losses over the transducer ops, for `model.compile(loss=...)`.

One loss per module, on the shared base of `tf_transducer.losses.base`.
"""

from tf_transducer.losses.ctc import CtcLoss
from tf_transducer.losses.ctc import ctc_feasible
from tf_transducer.losses.fused import FusedRnntLoss
from tf_transducer.losses.lattice import RecognitionLatticeLoss
from tf_transducer.losses.neural_transducer import NeuralTransducerLoss
from tf_transducer.losses.pruned import PrunedRnntLoss
from tf_transducer.losses.rnnt import RnntLoss
from tf_transducer.losses.tdt import FusedTdtLoss
from tf_transducer.losses.tdt import TdtLoss

__all__ = [
    "CtcLoss",
    "FusedRnntLoss",
    "NeuralTransducerLoss",
    "PrunedRnntLoss",
    "RecognitionLatticeLoss",
    "RnntLoss",
    "FusedTdtLoss",
    "TdtLoss",
    "ctc_feasible",
]
