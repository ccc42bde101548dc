"""Keras models: DeepSpeech (CTC) and the RNN-T Transducer."""

from tf_transducer.models.deepspeech import DeepSpeech
from tf_transducer.models.transducer import Transducer

__all__ = ["DeepSpeech", "Transducer"]
