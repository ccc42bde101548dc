# SPDX-License-Identifier: Apache-2.0
"""Regenerates the bundled spoken-digits corpus (tf_transducer/data/corpora/digits).

Each utterance is a random string of 3 to 6 digits read as words ("four seven
two"), synthesised by espeak-ng or flite (Debian packages `espeak-ng`, `flite`)
at a random speed, resampled to 8 kHz (float64 windowed-sinc,
tf_transducer.data.resample), trimmed to the speech plus 0.1 s on each side,
and stored as 16-bit FLAC. The split is by voice, so that dev and test voices
are never heard in training. Training has 76 voices (72 espeak-ng variants
across 8 English accents, 4 flite voices), each utterance at a random pitch
(and, for espeak-ng, word gap), with "oh" for some zeros, and a quarter of
them read one word at a time with pauses between; dev and test
(3 voices each) are as they were first made, so results stay comparable.

Everything is seeded: with the same espeak-ng / flite / libsndfile versions
the script rewrites the committed files byte for byte (it checks the ones it
finds and says which differ).

Usage: python -m tf_transducer.data.corpora.make_digits [--out DIR] [--check]
"""

import hashlib
import os
import shutil
import subprocess
import tempfile

import numpy as np
import soundfile as sf
from absl import app
from absl import flags

from tf_transducer.data.corpora._writing import flac_bytes as int16_flac
from tf_transducer.data.corpora._writing import trim
from tf_transducer.data.corpora._writing import write_corpus
from tf_transducer.data.resample import resample

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = flags.DEFINE_string("out", os.path.join(HERE, "digits"), "Output folder.")
CHECK = flags.DEFINE_bool(
    "check", False, "Only compare regenerated audio with the files in --out."
)

RATE = 8000
PER_VOICE = {"train": 5, "dev": 18, "test": 18}
FLITE_TRAIN_PER_VOICE = 40
WORDS = "zero one two three four five six seven eight nine".split()
# (engine, voice): espeak-ng "language+variant", or a flite voice. Dev and
# test voices are never heard in training, and neither are their espeak
# variants (f2, f3, f4, m3, m8) with any accent.
_ACCENTS = ["en-us", "en-gb", "en-gb-scotland", "en-gb-x-rp", "en-029",
            "en-gb-x-gbclan", "en-gb-x-gbcwmd", "en-us-nyc"]  # fmt: skip
# espeak-ng 1.51's variants, less the dev / test ones and the robots,
# whispers and croaks that no person sounds like.
_TRAIN_VARIANTS = ["m1", "m2", "m4", "m5", "m6", "m7", "f1", "f5", "klatt", "klatt2",
                   "klatt3", "klatt4", "klatt5", "klatt6", "Alex", "Alicia",
                   "Andrea", "Andy", "Annie", "AnxiousAndy", "antonio", "aunty",
                   "belinda", "benjamin", "Denis", "Diogo", "Gene", "Gene2",
                   "gustave", "Henrique", "Hugo", "Jacky", "Lee", "Mario", "Marco",
                   "marcelo", "Michael", "Mike", "Mr", "Nguyen", "Storm", "adam",
                   "anika", "announcer", "boris", "caleb", "david", "ed", "edward",
                   "edward2", "grandma", "grandpa", "iven", "iven2", "iven3", "john",
                   "linda", "max", "norbert", "pablo", "paul", "pedro", "quincy",
                   "rob", "robert", "sandro", "shelby", "steph", "steph2", "travis",
                   "victor", "zac"]  # fmt: skip
_FLITE_TRAIN = ["kal", "kal16", "awb", "slt"]
VOICES = {
    "train": [
        ("espeak", f"{_ACCENTS[i % len(_ACCENTS)]}+{v}")
        for i, v in enumerate(_TRAIN_VARIANTS)
    ]
    + [("flite", v) for v in _FLITE_TRAIN],
    "dev": [
        ("espeak", "en-us+f3"),
        ("espeak", "en-gb-x-gbcwmd+m3"),
        ("flite", "rms"),
    ],
    "test": [
        ("espeak", "en-gb+f4"),
        ("espeak", "en-029+m8"),
        ("espeak", "en-us-nyc+f2"),
    ],
}
# Training utterances vary more than the dev / test ones (which are kept as
# they were, so that results stay comparable): espeak pitch and word gaps,
# flite pitch, and "oh" for zero as people say it.
OH_CHANCE = 0.3
# Some training strings are read one word at a time, with a pause after each
# word (as people read out a number slowly, and as prompts joined from
# recorded words sound).
WORD_BY_WORD_CHANCE = 0.25
PAUSE_RANGE = (0.08, 0.5)


def voice_settings(engine, rng, varied):
    """One utterance's random reading settings (varied: pitch and word gap too)."""
    if engine == "espeak":
        settings = dict(
            speed=int(rng.integers(130, 191) if not varied else rng.integers(115, 196))
        )
        if varied:
            settings.update(
                pitch=int(rng.integers(20, 81)), gap=int(rng.integers(0, 9))
            )
        return settings
    settings = dict(stretch=f"{rng.uniform(0.85, 1.2):.3f}")
    if varied:
        settings.update(f0=int(rng.integers(80, 231)))
    return settings


def synthesise(engine, voice, text, settings, workdir):
    """float64 samples at RATE of `text` read by one voice."""
    wav = os.path.join(workdir, "out.wav")
    if engine == "espeak":
        command = ["espeak-ng", "-v", voice, "-s", str(settings["speed"])]
        if "pitch" in settings:
            command += ["-p", str(settings["pitch"]), "-g", str(settings["gap"])]
        command += ["-w", wav, text]
    else:
        stretch = settings["stretch"]
        command = ["flite", "-voice", voice, "--setf", f"duration_stretch={stretch}"]
        if "f0" in settings:
            command += ["--setf", f"int_f0_target_mean={settings['f0']}"]
        command += ["-t", text, "-o", wav]
    subprocess.run(command, check=True, capture_output=True)
    audio, rate = sf.read(wav, dtype="float64")
    if audio.ndim == 2:
        audio = audio.mean(axis=1)
    return resample(audio, int(rate), RATE)


def read_out(engine, voice, words, settings, pauses, workdir):
    """The words read as one phrase, or one word at a time.

    With pauses (seconds between words) each word is read alone, trimmed to
    its speech, with silence between.
    """
    if pauses is None:
        return synthesise(engine, voice, " ".join(words), settings, workdir)
    pieces = []
    for i, word in enumerate(words):
        if i:
            pieces.append(np.zeros(int(pauses[i - 1] * RATE)))
        audio = synthesise(engine, voice, word, settings, workdir)
        pieces.append(trim(audio, RATE, 0.02))
    return np.concatenate(pieces)


def flac_bytes(audio):
    """16-bit FLAC of float samples at RATE, trimmed to the speech + 0.1 s."""
    pcm = np.clip(np.round(trim(audio, RATE, 0.1) * 32767), -32768, 32767)
    return int16_flac(pcm.astype(np.int16), RATE)


def utterances():
    """What to synthesise, for every utterance.

    Yields:
      (split, file name, words, engine, voice, reading settings, pauses),
      pauses None to read the words as one phrase.
    """
    for split, voices in VOICES.items():
        for engine, voice in voices:
            key = f"{engine}:{voice}".encode()
            if split == "train":
                key += b":varied"
            seed = int.from_bytes(hashlib.sha256(key).digest()[:8], "little")
            rng = np.random.default_rng(seed)
            tag = voice.replace("+", "_")
            count = PER_VOICE[split]
            if split == "train" and engine == "flite":
                count = FLITE_TRAIN_PER_VOICE
            for i in range(count):
                digits = rng.integers(0, 10, size=rng.integers(3, 7))
                words = [WORDS[d] for d in digits]
                varied, separate = split == "train", False
                if varied:
                    oh = rng.random(len(words)) < OH_CHANCE
                    pairs = zip(words, oh, strict=True)
                    words = ["oh" if w == "zero" and o else w for w, o in pairs]
                    separate = rng.random() < WORD_BY_WORD_CHANCE
                settings = voice_settings(engine, rng, varied)
                pauses = None
                if separate:
                    pauses = rng.uniform(*PAUSE_RANGE, size=len(words) - 1)
                name = f"{split}/{engine}_{tag}_{i:02d}.flac"
                yield split, name, words, engine, voice, settings, pauses


def main(argv):
    """Writes the corpus to --out (or, with --check, compares); the exit status."""
    del argv
    for tool in ("espeak-ng", "flite"):
        if shutil.which(tool) is None:
            raise app.UsageError(f"{tool} not found: apt-get install espeak-ng flite")
    with tempfile.TemporaryDirectory() as workdir:
        items = (
            (
                f"{split}.csv",
                name,
                flac_bytes(read_out(e, v, words, settings, pauses, workdir)),
                " ".join(words),
            )
            for split, name, words, e, v, settings, pauses in utterances()
        )
        return write_corpus(OUT.value, items, CHECK.value)


if __name__ == "__main__":
    app.run(main)
