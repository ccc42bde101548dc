# SPDX-License-Identifier: Apache-2.0
"""tf_transducer: transducer losses as TensorFlow custom ops, for Keras 3.

The public API; everything else is internal.
"""

from importlib import metadata as _metadata

from tf_transducer import _console

_console.quiet_tensorflow_import()  # before TensorFlow loads

from tf_transducer import data, decoding, export, lattice, layers, losses, models
from tf_transducer.data import CharacterAlphabet, SpeechDataset, SubwordEncoder
from tf_transducer.lattice import RecognitionLattice
from tf_transducer.layers import (
    ConformerBlock,
    ConformerEncoder,
    ConvSubsampling,
    FeatureNormalization,
    FrameStacking,
    LogMelSpectrogram,
    Mfcc,
    NeuralTransducer,
    SpecAugment,
)
from tf_transducer.losses import (
    CtcLoss,
    FusedRnntLoss,
    NeuralTransducerLoss,
    PrunedRnntLoss,
    RecognitionLatticeLoss,
    RnntLoss,
)
from tf_transducer.ops import (
    OpLibraryError,
    do_rnnt_pruning,
    get_rnnt_logprobs,
    get_rnnt_logprobs_joint,
    get_rnnt_logprobs_pruned,
    get_rnnt_logprobs_smoothed,
    get_rnnt_prune_ranges,
    mutual_information_recursion,
    mutual_information_recursion_tf,
    rnnt_loss,
    rnnt_loss_joint,
    rnnt_loss_pruned,
    rnnt_loss_simple,
    rnnt_loss_smoothed,
)

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
]
