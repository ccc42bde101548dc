# SPDX-License-Identifier: Apache-2.0
"""Text encoders: transcripts <-> label ids.

One convention everywhere in tf_transducer: id 0 is the blank (CTC's blank,
the transducer's termination symbol) and the symbols are 1 .. vocab_size - 1,
so `vocab_size` counts the blank. Label sequences in batches are padded with
-1 (`PAD_ID`), which is never a class.
"""

import base64
import collections
import json
import os
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any
from typing import TypeAlias

from tf_transducer._optional import require

BLANK = 0
PAD_ID = -1


class CharacterAlphabet:
    """Characters <-> ids 1..N (0 is the blank).

    Args:
      characters: the symbols, each one character, no repeats.
      drop_unknown: if False (default), encoding a character outside the
        alphabet raises ValueError naming it; if True it is dropped and
        counted in `dropped` (character -> count).
    """

    def __init__(self, characters: Sequence[str], drop_unknown: bool = False) -> None:
        characters = list(characters)
        if not characters:
            raise ValueError("characters must not be empty")
        for c in characters:
            if not isinstance(c, str) or len(c) != 1:
                raise ValueError(f"each symbol must be one character, got {c!r}")
        repeated = [c for c, n in collections.Counter(characters).items() if n > 1]
        if repeated:
            raise ValueError(f"characters repeat: {repeated}")
        self.characters = characters
        self.drop_unknown = drop_unknown
        self.dropped: collections.Counter[str] = collections.Counter()
        self._ids = {c: i + 1 for i, c in enumerate(characters)}

    @classmethod
    def english(cls, drop_unknown: bool = False) -> "CharacterAlphabet":
        """Space, a-z and the apostrophe (DeepSpeech's English alphabet)."""
        return cls(" abcdefghijklmnopqrstuvwxyz'", drop_unknown)

    @classmethod
    def from_file(cls, path: str, drop_unknown: bool = False) -> "CharacterAlphabet":
        r"""Reads a DeepSpeech alphabet file.

        UTF-8, one symbol per line; a line starting with '#' is a comment,
        and '\#' stands for the '#' character itself.
        """
        symbols = []
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                line = line.rstrip("\r\n")
                if line.startswith("#"):
                    continue
                if line == "\\#":
                    line = "#"
                if len(line) != 1:
                    raise ValueError(
                        f"{path}:{number}: expected one character per line, "
                        f"got {line!r}"
                    )
                symbols.append(line)
        try:
            return cls(symbols, drop_unknown)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None

    def save(self, path: str) -> None:
        """Writes the alphabet as a DeepSpeech alphabet file."""
        with open(path, "w", encoding="utf-8") as f:
            f.write("# One symbol per line; id = line number among symbols + 1.\n")
            for c in self.characters:
                f.write("\\#\n" if c == "#" else f"{c}\n")

    @property
    def vocab_size(self) -> int:
        """Classes including the blank."""
        return len(self.characters) + 1

    def encode(self, text: str) -> list[int]:
        ids = []
        for position, c in enumerate(text):
            i = self._ids.get(c)
            if i is not None:
                ids.append(i)
            elif self.drop_unknown:
                self.dropped[c] += 1
            else:
                raise ValueError(
                    f"character {c!r} at position {position} of {text!r} is not "
                    "in the alphabet (pass drop_unknown=True to drop such characters)"
                )
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        """The characters of ids; blanks and padding (ids <= 0) are skipped."""
        out = []
        for i in ids:
            i = int(i)
            if i <= 0:
                continue
            if i > len(self.characters):
                raise ValueError(
                    f"id {i} is outside the alphabet (vocab_size {self.vocab_size})"
                )
            out.append(self.characters[i - 1])
        return "".join(out)

    def get_config(self) -> dict[str, Any]:
        return {
            "characters": "".join(self.characters),
            "drop_unknown": self.drop_unknown,
        }

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "CharacterAlphabet":
        return cls(list(config["characters"]), config.get("drop_unknown", False))


def _check_word_delimiter(value: object) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"word_delimiter must be a bool, got {value!r}")


class SubwordEncoder:
    """SentencePiece subwords <-> ids 1..N (0 is the blank).

    Build one with `SubwordEncoder.train(transcripts, vocab_size)`; the model
    travels as bytes (`save` / `load`, `get_config`). Text the model cannot
    cover maps to its <unk> piece, id 1.

    word_delimiter=True adds one class after the pieces (id vocab_size - 1,
    shown as "|", wav2vec 2.0's word delimiter) that `encode` puts between
    words and `decode` drops. A transducer must then emit a symbol at every
    word boundary, which teaches it where words end: with whole-word pieces
    that is what tells "seven seven" from "seven", where the prediction
    network's context is the same after either word.
    """

    def __init__(self, model_proto: bytes, word_delimiter: bool = False) -> None:
        spm = require("sentencepiece")

        _check_word_delimiter(word_delimiter)
        self.model_proto = bytes(model_proto)
        self.word_delimiter = word_delimiter
        self._sp = spm.SentencePieceProcessor(model_proto=self.model_proto)
        if self._sp.pad_id() != BLANK:
            raise ValueError(
                f"the SentencePiece model must reserve id {BLANK} (its pad piece) "
                f"for the blank; its pad id is {self._sp.pad_id()}"
            )
        # The delimiter's id, or None: one past the pieces.
        self._delimiter: int | None = (
            self._sp.get_piece_size() if word_delimiter else None
        )

    @classmethod
    def train(
        cls, transcripts: Iterable[str], vocab_size: int, model_type: str = "unigram",
        character_coverage: float = 1.0, word_delimiter: bool = False,
    ) -> "SubwordEncoder":  # fmt: skip
        """Trains a SentencePiece model on transcripts (deterministic, 1 thread).

        Args:
          transcripts: training text, one utterance per item.
          vocab_size: classes including the blank (and <unk>), and the
            delimiter when word_delimiter.
          model_type: "unigram", "bpe", "char" or "word".
          character_coverage: share of characters the pieces must cover.
          word_delimiter: a class between words (see the class docstring).
        """
        import io

        spm = require("sentencepiece")

        _check_word_delimiter(word_delimiter)  # before the training, not after

        text = [t for t in transcripts if t]
        if not text:
            raise ValueError("transcripts must contain some text to train on")
        model = io.BytesIO()
        options = dict(
            sentence_iterator=iter(text),
            model_writer=model,
            vocab_size=vocab_size - int(word_delimiter),
            model_type=model_type,
            character_coverage=character_coverage,
            pad_id=BLANK,
            pad_piece="<blank>",
            unk_id=1,
            bos_id=-1,
            eos_id=-1,
            num_threads=1,
            minloglevel=2,
        )
        try:
            spm.SentencePieceTrainer.train(**options)
        except RuntimeError as error:  # e.g. a vocab_size the text cannot fill
            raise ValueError(
                f"SentencePiece training failed (vocab_size={vocab_size}, "
                f"model_type={model_type!r}): {error}"
            ) from None
        return cls(model.getvalue(), word_delimiter)

    @classmethod
    def load(cls, path: str) -> "SubwordEncoder":
        with open(path, "rb") as f:
            return cls(f.read())

    def save(self, path: str) -> None:
        """Writes the SentencePiece model (a .model file `load` reads)."""
        if self.word_delimiter:
            raise ValueError(
                f"{path}: a SentencePiece .model cannot record word_delimiter=True; "
                "keep the encoder as get_config() (text_encoder.json) instead"
            )
        with open(path, "wb") as f:
            f.write(self.model_proto)

    @property
    def vocab_size(self) -> int:
        return self._sp.get_piece_size() + int(self.word_delimiter)

    def encode(self, text: str) -> list[int]:
        delimiter = self._delimiter  # None unless word_delimiter
        if delimiter is None:
            return list(self._sp.encode(text))
        ids: list[int] = []
        for word in text.split():
            if ids:
                ids.append(delimiter)
            ids.extend(self._sp.encode(word))
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ids; blanks, padding (ids <= 0) and delimiters are skipped."""
        ids = [int(i) for i in ids]
        top = self.vocab_size - 1
        if ids and max(ids) > top:
            raise ValueError(f"id {max(ids)} is outside the vocabulary (0..{top})")
        return self._sp.decode([i for i in ids if 0 < i != self._delimiter])

    def get_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "model_proto": base64.b64encode(self.model_proto).decode("ascii")
        }
        if self.word_delimiter:
            config["word_delimiter"] = True
        return config

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "SubwordEncoder":
        return cls(
            base64.b64decode(config["model_proto"]),
            config.get("word_delimiter", False),
        )


# What `load_text_encoder` and `load_text_encoder_json` give.
TextEncoder: TypeAlias = CharacterAlphabet | SubwordEncoder


def save_text_encoder_json(encoder: TextEncoder, path: str) -> None:
    """Writes a CharacterAlphabet / SubwordEncoder as JSON, atomically.

    The file holds {"kind", "config"}: what `load_text_encoder_json` reads.
    """
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump({"kind": type(encoder).__name__, "config": encoder.get_config()}, f)
    os.replace(path + ".tmp", path)


def load_text_encoder_json(path: str) -> TextEncoder:
    """The CharacterAlphabet / SubwordEncoder `save_text_encoder_json` wrote.

    Raises:
      FileNotFoundError: no such file.
      ValueError: naming the file and what is wrong with it.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such text encoder file")
    try:
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not a JSON text encoder ({error})") from None
    kinds: dict[str, type[CharacterAlphabet] | type[SubwordEncoder]] = {
        "CharacterAlphabet": CharacterAlphabet,
        "SubwordEncoder": SubwordEncoder,
    }
    if not isinstance(saved, dict) or saved.get("kind") not in kinds:
        kind = saved.get("kind") if isinstance(saved, dict) else saved
        raise ValueError(f"{path}: unknown text encoder {kind!r}")
    try:
        return kinds[saved["kind"]].from_config(saved["config"])
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{path}: bad {saved['kind']} config ({error})") from None


def load_text_encoder(path: str) -> TextEncoder:
    """A CharacterAlphabet (alphabet file) or SubwordEncoder (.model file)."""
    if os.path.splitext(path)[1] == ".model":
        return SubwordEncoder.load(path)
    return CharacterAlphabet.from_file(path)
