"""TFLite export and on-device (LiteRT) streaming runners."""

from tf_transducer.export.deepspeech import DeepSpeechStream, export_deepspeech
from tf_transducer.export.transducer import TransducerStream, export_transducer

__all__ = [
    "DeepSpeechStream",
    "TransducerStream",
    "export_deepspeech",
    "export_transducer",
]
