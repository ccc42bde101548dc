# SPDX-License-Identifier: Apache-2.0
"""What the corpus scripts (make_digits, make_real_digits) share: trimming,
FLAC bytes, and writing the files and manifests (or checking them byte for
byte)."""

import csv
import io
import os

import numpy as np
import soundfile as sf


def trim(audio, rate, margin, threshold=0.02):
    """The span above threshold * peak, plus `margin` seconds each side."""
    loud = np.flatnonzero(np.abs(audio) > threshold * np.abs(audio).max())
    pad = int(margin * rate)
    return audio[max(loud[0] - pad, 0) : loud[-1] + pad + 1]


def flac_bytes(pcm, rate):
    """16-bit FLAC of int16 samples."""
    buffer = io.BytesIO()
    sf.write(buffer, pcm, rate, format="FLAC", subtype="PCM_16")
    return buffer.getvalue()


def write_corpus(out, items, check):
    """Writes (or with check, compares) each (manifest, file name, bytes,
    transcript) of items under out, then each manifest (DeepSpeech CSV,
    relative paths). Returns the exit status: 1 when a file differs."""
    rows, differ = {}, []
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
