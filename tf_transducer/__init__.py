# SPDX-License-Identifier: Apache-2.0
"""tf_transducer: transducer losses as TensorFlow custom ops, for Keras 3.

The public API; everything else is internal.
"""

from importlib import metadata as _metadata

from tf_transducer import _console

_console.quiet_tensorflow_import()  # before TensorFlow loads

from tf_transducer import data
from tf_transducer import decoding
from tf_transducer import export
from tf_transducer import lattice
from tf_transducer import layers
from tf_transducer import losses
from tf_transducer import models
from tf_transducer.data import CharacterAlphabet
from tf_transducer.data import SpeechDataset
from tf_transducer.data import SubwordEncoder
from tf_transducer.lattice import RecognitionLattice
from tf_transducer.layers import ConformerBlock
from tf_transducer.layers import ConformerEncoder
from tf_transducer.layers import ConvSubsampling
from tf_transducer.layers import FeatureNormalization
from tf_transducer.layers import FrameStacking
from tf_transducer.layers import LogMelSpectrogram
from tf_transducer.layers import Mfcc
from tf_transducer.layers import NeuralTransducer
from tf_transducer.layers import SpecAugment
from tf_transducer.losses import CtcLoss
from tf_transducer.losses import FusedRnntLoss
from tf_transducer.losses import FusedTdtLoss
from tf_transducer.losses import NeuralTransducerLoss
from tf_transducer.losses import PrunedRnntLoss
from tf_transducer.losses import RecognitionLatticeLoss
from tf_transducer.losses import RnntLoss
from tf_transducer.losses import TdtLoss
from tf_transducer.ops import OpLibraryError
from tf_transducer.ops import do_rnnt_pruning
from tf_transducer.ops import get_rnnt_logprobs
from tf_transducer.ops import get_rnnt_logprobs_joint
from tf_transducer.ops import get_rnnt_logprobs_pruned
from tf_transducer.ops import get_rnnt_logprobs_smoothed
from tf_transducer.ops import get_rnnt_prune_ranges
from tf_transducer.ops import get_tdt_prune_ranges
from tf_transducer.ops import mutual_information_recursion
from tf_transducer.ops import mutual_information_recursion_tf
from tf_transducer.ops import rnnt_loss
from tf_transducer.ops import rnnt_loss_joint
from tf_transducer.ops import rnnt_loss_pruned
from tf_transducer.ops import rnnt_loss_simple
from tf_transducer.ops import rnnt_loss_smoothed
from tf_transducer.ops import tdt_loss
from tf_transducer.ops import tdt_loss_joint
from tf_transducer.ops import tdt_loss_pruned
from tf_transducer.ops import tdt_loss_simple

try:  # one source of truth: the version in pyproject.toml, as installed
    __version__ = _metadata.version("tf_transducer")
except _metadata.PackageNotFoundError:  # sources on sys.path, not installed
    __version__ = "0+unknown"

__all__ = [
    "CharacterAlphabet",
    "ConformerBlock",
    "ConformerEncoder",
    "ConvSubsampling",
    "CtcLoss",
    "FeatureNormalization",
    "FrameStacking",
    "FusedRnntLoss",
    "LogMelSpectrogram",
    "Mfcc",
    "NeuralTransducer",
    "NeuralTransducerLoss",
    "OpLibraryError",
    "PrunedRnntLoss",
    "RecognitionLattice",
    "RecognitionLatticeLoss",
    "RnntLoss",
    "FusedTdtLoss",
    "TdtLoss",
    "SpecAugment",
    "SpeechDataset",
    "SubwordEncoder",
    "data",
    "decoding",
    "do_rnnt_pruning",
    "export",
    "get_rnnt_logprobs",
    "get_rnnt_logprobs_joint",
    "get_rnnt_logprobs_pruned",
    "get_rnnt_logprobs_smoothed",
    "get_rnnt_prune_ranges",
    "get_tdt_prune_ranges",
    "lattice",
    "layers",
    "losses",
    "models",
    "mutual_information_recursion",
    "mutual_information_recursion_tf",
    "rnnt_loss",
    "rnnt_loss_joint",
    "rnnt_loss_pruned",
    "rnnt_loss_simple",
    "rnnt_loss_smoothed",
    "tdt_loss",
    "tdt_loss_joint",
    "tdt_loss_pruned",
    "tdt_loss_simple",
]
