"""TFLite export and on-device (LiteRT) streaming runners."""

from tf_transducer.export.deepspeech import DeepSpeechStream, export_deepspeech

__all__ = ["DeepSpeechStream", "export_deepspeech"]
