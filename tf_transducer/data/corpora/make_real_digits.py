# SPDX-License-Identifier: Apache-2.0
"""Regenerates the bundled real-voice digits (tf_transducer/data/corpora/digits_real).

Human recordings of digits, for testing only (never trained on), from two
Debian packages (see README.md for the licences):

- `asterisk-core-sounds-en-wav`: Allison Smith reading each digit ("zero" to
  "nine", and "oh") on its own, 8 kHz. Each of 24 strings of 3 to 6 digits
  joins her recordings of its words, each cut to the speech plus 30 to 120
  ms of its own room tone on each side.
- `pocketsphinx-testdata`: `dhd.2934z.raw`, a man reading "two nine three four
  zero" as one connected utterance (TIDIGITS style), 16 kHz, kept at 16 kHz.

The joins make the word times of the Allison strings known: `real_words.json`
gives each word's start and end in seconds (where its recording rises above,
and last is above, 2% of its peak: `trim`'s rule), for testing timestamps.

Seeded: with the same packages and libsndfile the script rewrites the
committed files byte for byte (`--check` compares instead).

Usage: python -m tf_transducer.data.corpora.make_real_digits [--out DIR] [--check]
"""

import json
import os

import numpy as np
import soundfile as sf
from absl import app
from absl import flags

from tf_transducer.data.corpora._writing import flac_bytes
from tf_transducer.data.corpora._writing import trim
from tf_transducer.data.corpora._writing import write_corpus

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = flags.DEFINE_string("out", os.path.join(HERE, "digits_real"), "Output folder.")
CHECK = flags.DEFINE_bool("check", False, "Only compare with the files in --out.")

ASTERISK = "/usr/share/asterisk/sounds/en/digits"
TIDIGITS = "/usr/share/pocketsphinx/test/data/tidigits/dhd.2934z.raw"
WORDS = "zero one two three four five six seven eight nine".split()
STRINGS, SEED = 24, 2026


def speech_span(audio, margin):
    """(first, last + 1) loud samples of a recording within `trim`'s cut of it."""
    loud = np.flatnonzero(np.abs(audio) > 0.02 * np.abs(audio).max())
    start = max(loud[0] - int(margin * 8000), 0)
    return loud[0] - start, loud[-1] + 1 - start


def files(times):
    """(file name, bytes, transcript) of every utterance.

    Fills `times` with {file name: [{"word", "start", "end"}]} of the
    joined strings.
    """
    recordings = {}
    for name in WORDS[1:] + ["0", "oh"]:
        word = "zero" if name == "0" else name
        source = name if word in ("oh", "zero") else str(WORDS.index(word))
        audio, rate = sf.read(os.path.join(ASTERISK, f"{source}.wav"), dtype="int16")
        if rate != 8000:
            raise ValueError(f"{ASTERISK}/{source}.wav: expected 8 kHz, got {rate}")
        recordings[word] = audio
    rng = np.random.default_rng(SEED)
    for i in range(STRINGS):
        digits = rng.integers(0, 10, size=rng.integers(3, 7))
        words = [WORDS[d] for d in digits]
        words = ["oh" if w == "zero" and rng.random() < 0.5 else w for w in words]
        margins = [rng.uniform(0.03, 0.12) for _ in words]
        parts = [
            trim(recordings[w], 8000, m) for w, m in zip(words, margins, strict=True)
        ]
        offset, spans = 0, []
        for word, part, margin in zip(words, parts, margins, strict=True):
            first, last = speech_span(recordings[word], margin)
            spans.append({"word": word, "start": round((offset + first) / 8000, 4),
                          "end": round((offset + last) / 8000, 4)})  # fmt: skip
            offset += len(part)
        times[f"asterisk_allison_{i:02d}.flac"] = spans
        yield (
            f"asterisk_allison_{i:02d}.flac",
            flac_bytes(np.concatenate(parts), 8000),
            " ".join(words),
        )
    pcm = np.fromfile(TIDIGITS, dtype="<i2")
    yield "tidigits_dhd_2934z.flac", flac_bytes(pcm, 16000), "two nine three four zero"


def main(argv):
    """Writes the corpus to --out (or, with --check, compares); the exit status."""
    del argv
    for path in (ASTERISK, TIDIGITS):
        if not os.path.exists(path):
            raise app.UsageError(
                f"{path} not found: apt-get install asterisk-core-sounds-en-wav "
                "pocketsphinx-testdata"
            )
    times = {}
    items = (("real.csv", *item) for item in files(times))
    status = write_corpus(OUT.value, items, CHECK.value)
    text = json.dumps(times, indent=1) + "\n"
    path = os.path.join(OUT.value, "real_words.json")
    if CHECK.value:
        with open(path) as f:
            same = f.read() == text
        print("real_words.json " + ("is the same" if same else "differs"))
        return status or int(not same)
    with open(path, "w") as f:
        f.write(text)
    return status


if __name__ == "__main__":
    app.run(main)
