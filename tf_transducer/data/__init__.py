# SPDX-License-Identifier: Apache-2.0
"""Audio data: manifests, decoding, text encoders, pipelines, augmentation, corpora.

The pipelines are `tf.data` ones; waveform augmentation is in `augment`;
LibriSpeech, Common Voice and audio-folder layouts are read by `layouts`.
"""

from tf_transducer.data.audio import AudioInfo
from tf_transducer.data.audio import BadAudioError
from tf_transducer.data.audio import load_audio
from tf_transducer.data.audio import probe
from tf_transducer.data.audio import read_audio
from tf_transducer.data.augment import WaveAugment
from tf_transducer.data.augment import augment_batch
from tf_transducer.data.calibration import calibration_audio
from tf_transducer.data.layouts import common_voice_utterances
from tf_transducer.data.layouts import corpus_utterances
from tf_transducer.data.layouts import is_corpus
from tf_transducer.data.layouts import librispeech_utterances
from tf_transducer.data.layouts import load_utterances
from tf_transducer.data.layouts import wav_folder_utterances
from tf_transducer.data.layouts import write_manifest
from tf_transducer.data.manifest import Utterance
from tf_transducer.data.manifest import read_manifest
from tf_transducer.data.pipeline import SpeechDataset
from tf_transducer.data.resample import resample
from tf_transducer.data.text import BLANK
from tf_transducer.data.text import PAD_ID
from tf_transducer.data.text import CharacterAlphabet
from tf_transducer.data.text import SubwordEncoder
from tf_transducer.data.text import load_text_encoder

__all__ = [
    "BLANK",
    "PAD_ID",
    "AudioInfo",
    "BadAudioError",
    "CharacterAlphabet",
    "SpeechDataset",
    "SubwordEncoder",
    "Utterance",
    "WaveAugment",
    "augment_batch",
    "calibration_audio",
    "common_voice_utterances",
    "corpus_utterances",
    "is_corpus",
    "librispeech_utterances",
    "load_utterances",
    "load_audio",
    "load_text_encoder",
    "probe",
    "read_audio",
    "read_manifest",
    "resample",
    "wav_folder_utterances",
    "write_manifest",
]
