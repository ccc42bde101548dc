# SPDX-License-Identifier: Apache-2.0
"""What the corpus scripts (make_digits, make_real_digits) share.

Trimming, FLAC bytes, and writing the files and manifests (or checking them
byte for byte).
"""

import csv
import io
import os
from collections.abc import Iterable

import numpy as np
import soundfile as sf


def trim(
    audio: np.ndarray, rate: int, margin: float, threshold: float = 0.02
) -> np.ndarray:
    """The span above threshold * peak, plus `margin` seconds each side."""
    loud = np.flatnonzero(np.abs(audio) > threshold * np.abs(audio).max())
    pad = int(margin * rate)
    return audio[max(loud[0] - pad, 0) : loud[-1] + pad + 1]


def flac_bytes(pcm: np.ndarray, rate: int) -> bytes:
    """16-bit FLAC of int16 samples."""
    buffer = io.BytesIO()
    sf.write(buffer, pcm, rate, format="FLAC", subtype="PCM_16")
    return buffer.getvalue()


def write_corpus(
    out: str, items: Iterable[tuple[str, str, bytes, str]], check: bool
) -> int:
    """Writes (or with check, compares) the files of items, then the manifests.

    Each item is (manifest, file name, bytes, transcript), the file written
    under out; each manifest is a DeepSpeech CSV with relative paths.

    Returns:
      The exit status: 1 when a file differs.
    """
    rows: dict[str, list[tuple[str, int, str]]] = {}
    differ: list[str] = []
    for manifest, name, data, text in items:
        path = os.path.join(out, name)
        if check:
            with open(path, "rb") as f:
                if f.read() != data:
                    differ.append(name)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        rows.setdefault(manifest, []).append((name, len(data), text))
    if check:
        print(f"{len(differ)} files differ" + (f": {differ}" if differ else ""))
        return 1 if differ else 0
    for manifest, entries in rows.items():
        with open(os.path.join(out, manifest), "w", newline="") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(["wav_filename", "wav_filesize", "transcript"])
            writer.writerows(entries)
        print(f"{manifest}: {len(entries)} utterances")
    return 0
