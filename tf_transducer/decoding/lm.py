# SPDX-License-Identifier: Apache-2.0
"""Word n-gram language models for CTC and transducer beam search (shallow fusion).

Two back ends with one interface (`begin_state()`, `score(state, word) ->
(log10 probability, next state)`, `end_score(state)`):

- `KenLMModel`: KenLM's `.arpa` or binary models through the `kenlm` package
  (`pip install kenlm`, compiled on install; an optional extra);
- `ArpaModel`: a plain-Python reader of ARPA files with Katz back-off, for
  small models and for machines without kenlm.

`WordScorer` plugs either into `ctc_beam_search` and the transducer searches.
"""

import dataclasses
import math
import os
from collections.abc import Iterable
from collections.abc import Sequence
from typing import Any
from typing import Protocol

from tf_transducer._optional import available
from tf_transducer._optional import require

LN10 = math.log(10.0)


class KenLMModel:
    """A KenLM model (.arpa or .binary) via the kenlm package."""

    def __init__(self, path: str) -> None:
        kenlm = require("kenlm")  # (ArpaModel reads ARPA files without it)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"language model {path!r} does not exist")
        self._kenlm = kenlm
        try:
            self.model = kenlm.Model(path)
        except OSError as error:
            reason = str(error).split(" threw ")[-1]
            raise ValueError(
                f"language model {path!r}: KenLM cannot read it ({reason})"
            ) from None

    def begin_state(self) -> Any:
        state = self._kenlm.State()
        self.model.BeginSentenceWrite(state)
        return state

    def score(self, state: Any, word: str) -> tuple[float, Any]:
        out = self._kenlm.State()
        return self.model.BaseScore(state, word, out), out

    def end_score(self, state: Any) -> float:
        return self.score(state, "</s>")[0]


class ArpaModel:
    """An ARPA n-gram model in plain Python (back-off as in the ARPA format)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"language model {path!r} does not exist")
        self.prob: dict[tuple[str, ...], float] = {}
        self.backoff: dict[tuple[str, ...], float] = {}
        order = 0
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                line = line.strip()
                if not line or line.startswith("\\data\\") or line.startswith("ngram "):
                    continue
                if line.startswith("\\") and line.endswith("-grams:"):
                    order = int(line[1:].split("-")[0])
                    continue
                if line == "\\end\\":
                    break
                parts = line.split()
                if order == 0 or len(parts) < order + 1:
                    raise ValueError(
                        f"{path}:{number}: not an ARPA n-gram line: {line!r}"
                    )
                words = tuple(parts[1 : order + 1])
                self.prob[words] = float(parts[0])
                if len(parts) > order + 1:
                    self.backoff[words] = float(parts[order + 1])
        if not self.prob:
            raise ValueError(f"{path}: no n-grams found")
        self.order = max(len(k) for k in self.prob)

    def _log10(self, context: tuple[str, ...], word: str) -> float:
        for start in range(len(context) + 1):
            history = context[start:]
            if history + (word,) in self.prob:
                penalty = sum(self.backoff.get(context[s:], 0.0) for s in range(start))
                return penalty + self.prob[history + (word,)]
        unknown = self.prob.get(("<unk>",), -100.0)
        return (
            sum(self.backoff.get(context[s:], 0.0) for s in range(len(context)))
            + unknown
        )

    def begin_state(self) -> tuple[str, ...]:
        return ("<s>",)

    def score(self, state: tuple[str, ...], word: str) -> tuple[float, tuple[str, ...]]:
        log10 = self._log10(state, word)
        return log10, (state + (word,))[-(self.order - 1) :] if self.order > 1 else ()

    def end_score(self, state: tuple[str, ...]) -> float:
        return self._log10(state, "</s>")


def load_language_model(path: str) -> KenLMModel | ArpaModel:
    """The n-gram model in path, read by KenLM if it is installed.

    A KenLMModel if the kenlm package is installed (any KenLM file), else an
    ArpaModel (ARPA text files only).
    """
    if not available("kenlm"):
        return ArpaModel(path)
    return KenLMModel(path)


@dataclasses.dataclass
class LmContext:
    """What a search hypothesis carries for its language model.

    Attributes:
      state: the LM's state after the words scored so far (None: no LM).
      score: their natural-log LM probability.
      words: how many words were scored.
    """

    state: Any = None
    score: float = 0.0
    words: int = 0

    def copy(self) -> "LmContext":
        return dataclasses.replace(self)


class TextDecoder(Protocol):
    """What `WordScorer` needs of a text encoder: label ids -> text."""

    def decode(self, ids: Sequence[int], /) -> str: ...


class WordScorer:
    """Scores the words of label prefixes with a language model (natural log).

    Works with any text encoder whose `decode(labels)` gives text with words
    split by `space`: characters, SentencePiece subwords or whole words. A
    word is scored once the text has moved past it (a space or another word
    followed); the trailing word and the end of the sentence at `finish`.
    Used by the CTC and transducer beam searches, which keep an `LmContext`
    per hypothesis (`start`) and hand it to `extend` and `finish`.

    Args:
      model: a KenLMModel or ArpaModel.
      text_encoder: labels -> text (`CharacterAlphabet`, `SubwordEncoder`,
        ...).
      space: the character that ends a word.
    """

    def __init__(
        self,
        model: KenLMModel | ArpaModel,
        text_encoder: TextDecoder,
        space: str = " ",
    ) -> None:
        self.model = model
        self.text_encoder = text_encoder
        self.space = space
        self._breaks: dict[int, bool] = {}  # label -> whether it can complete a word

    def start(self) -> LmContext:
        """The context of the empty prefix."""
        return LmContext(self.model.begin_state())

    def _words(self, labels: Iterable[int]) -> tuple[list[str], bool]:
        text = self.text_encoder.decode(list(labels))
        words = text.split(self.space)
        return [w for w in words if w], text.endswith(self.space)

    def _can_complete_a_word(self, label: int) -> bool:
        """Whether appending label can complete a word.

        A space, a word-initial piece or a whole word does; a letter inside
        a word does not (then extend need not decode the prefix).
        """
        if label not in self._breaks:
            words, ended = self._words((label, label))
            self._breaks[label] = ended or len(words) > 1
        return self._breaks[label]

    def extend(self, lm: LmContext, prefix: Iterable[int], label: int) -> None:
        """Scores the words that appending label to prefix completes.

        Called when label is appended to prefix, whose context lm is; lm is
        updated in place.
        """
        if not self._can_complete_a_word(label):
            return
        words, ended = self._words(tuple(prefix) + (label,))
        done = words if ended else words[:-1]
        for word in done[lm.words :]:
            self._add(lm, word)

    def finish(self, lm: LmContext, prefix: Iterable[int]) -> None:
        """Scores the trailing word of prefix and the end of the sentence."""
        words, _ = self._words(prefix)
        for word in words[lm.words :]:
            self._add(lm, word)
        lm.score += LN10 * self.model.end_score(lm.state)

    def _add(self, lm: LmContext, word: str) -> None:
        log10, lm.state = self.model.score(lm.state, word)
        lm.score += LN10 * log10
        lm.words += 1
