"""Keras models: DeepSpeech (CTC), the RNN-T Transducer, lattice models (GNAT)."""

from tf_transducer.models.deepspeech import DeepSpeech
from tf_transducer.models.lattice_model import LatticeModel
from tf_transducer.models.transducer import Transducer

__all__ = ["DeepSpeech", "LatticeModel", "Transducer"]
