# SPDX-License-Identifier: Apache-2.0
"""Keras models for speech recognition.

DeepSpeech (CTC), the RNN-T Transducer, lattice models (GNAT), the Neural
Transducer.
"""

from tf_transducer.models.deepspeech import DeepSpeech
from tf_transducer.models.lattice_model import LatticeModel
from tf_transducer.models.legacy import CONFORMER_PRESETS
from tf_transducer.models.neural_transducer import NeuralTransducerModel
from tf_transducer.models.presets import PRESETS
from tf_transducer.models.transducer import Transducer

__all__ = [
    "CONFORMER_PRESETS",
    "DeepSpeech",
    "LatticeModel",
    "NeuralTransducerModel",
    "PRESETS",
    "Transducer",
]
