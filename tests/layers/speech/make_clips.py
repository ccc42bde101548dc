# SPDX-License-Identifier: Apache-2.0
"""Regenerates the synthetic speech clips of the feature-parity tests.

    python tests/layers/speech/make_clips.py   # needs espeak-ng and flite

Two voices (espeak-ng, flite), resampled to 16 kHz and stored as 16-bit
FLAC; the tests derive the hard cases (silences, quiet gain, clipping, DC
offset, 8 kHz) from them in numpy.
"""

import os
import subprocess
import sys
import tempfile

import numpy as np
import soundfile as sf

HERE = os.path.dirname(os.path.abspath(__file__))
TEXT = "Seven three nine. The quick brown fox jumps over the lazy dog."
VOICES = {
    "espeak.flac": lambda wav: ["espeak-ng", "-v", "en-us", "-w", wav, TEXT],
    "flite.flac": lambda wav: ["flite", "-t", TEXT, "-o", wav],
}


def main():
    sys.path.insert(0, os.path.join(HERE, "..", "..", ".."))
    from tf_transducer.data import load_audio

    for name, command in VOICES.items():
        with tempfile.TemporaryDirectory() as scratch:
            wav = os.path.join(scratch, "voice.wav")
            subprocess.run(command(wav), check=True, capture_output=True)
            audio = load_audio(wav, 16000)
        pcm = np.clip(np.round(audio * 32767), -32768, 32767).astype(np.int16)
        sf.write(os.path.join(HERE, name), pcm, 16000, subtype="PCM_16")
        print(f"{name}: {len(pcm) / 16000:.2f} s")


if __name__ == "__main__":
    main()
