# SPDX-License-Identifier: Apache-2.0
"""Keras layers: audio features, SpecAugment, and the transducers' parts."""

from tf_transducer.layers.conformer_block import ConformerBlock
from tf_transducer.layers.conformer_block import chunk_attention_mask
from tf_transducer.layers.conformer_encoder import ConformerEncoder
from tf_transducer.layers.conv_subsampling import ConvSubsampling
from tf_transducer.layers.feature_normalization import FeatureNormalization
from tf_transducer.layers.frame_stacking import FrameStacking
from tf_transducer.layers.log_mel_spectrogram import LogMelSpectrogram
from tf_transducer.layers.mfcc import Mfcc
from tf_transducer.layers.neural_transducer import NeuralTransducer
from tf_transducer.layers.prediction_network import PredictionNetwork
from tf_transducer.layers.spec_augment import SpecAugment
from tf_transducer.layers.transducer_encoder import TransducerEncoder
from tf_transducer.layers.transducer_joiner import TransducerJoiner

__all__ = [
    "ConformerBlock",
    "ConformerEncoder",
    "ConvSubsampling",
    "FeatureNormalization",
    "FrameStacking",
    "LogMelSpectrogram",
    "Mfcc",
    "NeuralTransducer",
    "PredictionNetwork",
    "SpecAugment",
    "TransducerEncoder",
    "TransducerJoiner",
    "chunk_attention_mask",
]
