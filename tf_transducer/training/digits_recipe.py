# SPDX-License-Identifier: Apache-2.0
"""The runs `make demo` trains on the bundled digits corpus, as RunConfigs.

The demo (examples/digits_transducer_demo.py) and the benchmarks that
measure its choices (bench_tdt_demo, bench_conformer_recipe) start from
these, so that a change of recipe is made in one place. The reasons for
each setting are in benchmarks/BENCHMARKS.md (sections named below).
"""

from tf_transducer.training.config import AugmentConfig
from tf_transducer.training.config import DataConfig
from tf_transducer.training.config import FeaturesConfig
from tf_transducer.training.config import ModelConfig
from tf_transducer.training.config import OptimizerConfig
from tf_transducer.training.config import RunConfig
from tf_transducer.training.config import TrainingConfig

SAMPLE_RATE, N_MELS = 8000, 40
ENCODERS = ("lstm", "conformer")
# The demo's epochs: the two train side by side, the Conformer's epoch
# costing about twice the LSTM's.
EPOCHS = {"lstm": 72, "conformer": 48}


def digits_config(
    encoder: str = "lstm", epochs: int | None = None, loss: str = "fused",
    wave_augment: str = "default", seed: int = 0,
) -> RunConfig:  # fmt: skip
    """The demo's RunConfig with an "lstm" or "conformer" encoder.

    Args:
      encoder: "lstm" (lstm-1m, 4 frames per encoder step) or "conformer"
        (conformer-2m's encoder with lstm-1m's prediction network and
        joiner, a CTC head, batches of 8).
      epochs: training epochs (default: the demo's, EPOCHS[encoder]).
      loss: training.loss ("fused": the RNN-T loss without stored logits).
      wave_augment: "default" or "none".
      seed: training.seed.
    """
    from tf_transducer.data.corpora import manifest
    from tf_transducer.models import PRESETS

    if encoder not in ENCODERS:
        raise ValueError(f"encoder must be one of {ENCODERS}, got {encoder!r}")
    if epochs is None:
        epochs = EPOCHS[encoder]
    if encoder == "lstm":
        # 4 frames per encoder step (40 ms): a step costs 152 ms against
        # 198 ms at 3, which pays for 72 epochs instead of 64 in about the
        # same time ("Real speech").
        model = ModelConfig("lstm-1m", encoder={"stack": 4})
        optimizer = OptimizerConfig(learning_rate=0.004)
        training = TrainingConfig(epochs=epochs, loss=loss, seed=seed)
    else:
        # 6 blocks of 96, 4x subsampling, chunks of 8 encoder frames (320
        # ms), 32 frames of left context. Attention wants a gentler start:
        # at 0.004 without a warm-up it stayed on the blank-only plateau for
        # 30 epochs; at 0.003 with 5 warm-up epochs it was still there after
        # 14 ("Streaming Conformer").
        lstm = PRESETS["lstm-1m"]
        model = ModelConfig(
            "conformer-2m", predictor=lstm["predictor"], joiner=lstm["joiner"]
        )
        optimizer = OptimizerConfig(learning_rate=0.002, lr_warmup_epochs=5)
        # A CTC head on the encoder (half the transducer loss's weight) and
        # batches of 8 (twice the updates per epoch, an epoch no slower):
        # real-voice beam WER 0.11 against 0.41 without either, and the
        # seeds no longer stall ("The Conformer recipe (issue 45)").
        training = TrainingConfig(
            epochs=epochs, loss=loss, seed=seed, ctc_weight=0.5, batch_size=8
        )
    return RunConfig(
        model=model,
        features=FeaturesConfig(sample_rate=SAMPLE_RATE, n_mels=N_MELS),
        # Whole words, with a class between words: without it the second of
        # two equal digits ("seven seven") was lost, the prediction
        # network's context being the same after either ("Word delimiter").
        data=DataConfig(
            train_files=(manifest("digits_train"),),
            text_encoder="words",
            word_delimiter=True,
        ),
        # Waveform augmentation only: with SpecAugment too, the small LSTM
        # model learned far slower (training loss 4.9 against 1.5 after 41
        # epochs).
        augment=AugmentConfig(spec_augment="none", wave_augment=wave_augment),
        optimizer=optimizer,
        # The same loss as "full", a step no slower ("RNN-T transducer and
        # the demo"), without the [B, T, U + 1, V] logits.
        training=training,
    )
