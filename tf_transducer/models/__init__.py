"""Keras models: DeepSpeech (CTC) so far; transducers follow."""

from tf_transducer.models.deepspeech import DeepSpeech

__all__ = ["DeepSpeech"]
