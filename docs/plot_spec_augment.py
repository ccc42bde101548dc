# SPDX-License-Identifier: Apache-2.0
"""Saves docs/img/spec_augment.png: a LibriVox clip before and after SpecAugment.

The 80-mel log spectrogram of the shortest bundled LibriVox clip, then the
same with each of the paper's policies (LB, LD, SM, SS), seed 0.

Usage: python docs/plot_spec_augment.py  (needs matplotlib: pip install matplotlib)
"""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import tf_transducer as tt  # noqa: E402
from tf_transducer.data.corpora import manifest  # noqa: E402
from tf_transducer.layers import SpecAugment  # noqa: E402


def main():
    data = tt.SpeechDataset(
        manifest("librivox"),
        tt.CharacterAlphabet.english(),
        features=tt.LogMelSpectrogram(n_mels=80),
    )
    shortest = int(np.argmin(data.durations))
    for batch in data.dataset(1, shuffle=False):
        if int(batch["index"][0]) == shortest:
            break
    features, lengths = batch["features"], batch["feature_length"]
    panels = [("original", features)]
    for name in ("LB", "LD", "SM", "SS"):
        layer = SpecAugment.from_preset(name, seed=0)
        panels.append((f"SpecAugment {name}", layer(features, lengths, training=True)))
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 1.6 * len(panels)))
    for ax, (title, values) in zip(axes, panels, strict=True):
        ax.imshow(np.asarray(values[0]).T, origin="lower", aspect="auto", cmap="magma")
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("mel bin")
    axes[-1].set_xlabel("frame (10 ms)")
    fig.tight_layout()
    out = os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "img", "spec_augment.png"
    )
    fig.savefig(out, dpi=60)
    print(f"saved {out}")


if __name__ == "__main__":
    main()
