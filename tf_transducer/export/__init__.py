# SPDX-License-Identifier: Apache-2.0
"""TFLite export and on-device (LiteRT) streaming runners."""

from tf_transducer.export.deepspeech import DeepSpeechStream
from tf_transducer.export.deepspeech import export_deepspeech
from tf_transducer.export.neural_transducer import NeuralTransducerStream
from tf_transducer.export.neural_transducer import export_neural_transducer
from tf_transducer.export.recognizer import RecognizerStream
from tf_transducer.export.recognizer import export_recognizer
from tf_transducer.export.transducer import export_transducer
from tf_transducer.export.transducer_stream import TransducerStream

__all__ = [
    "DeepSpeechStream",
    "NeuralTransducerStream",
    "RecognizerStream",
    "TransducerStream",
    "export_deepspeech",
    "export_neural_transducer",
    "export_recognizer",
    "export_transducer",
]
