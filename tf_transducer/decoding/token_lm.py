# SPDX-License-Identifier: Apache-2.0
"""A token-level n-gram language model as dense tables, for graph searches.

A back-off n-gram over the joint's own labels (an ARPA file whose words are
label ids, as icefall's token n-grams are written: `make_kn_lm.py` on
transcripts turned into ids) is a finite automaton: its states are the
model's contexts (its n-grams of order < N, and the empty context), and a
label moves a state to the longest context that ends the new history. Held
as tables, a search in a graph (or a TFLite program) steps it by gathers:

  goto    [S, V] int32: the state after a label (the blank stays);
  logp    [S, V] float32: ln P(label | state), back-off applied (blank: 0);
  final   [S] float32: ln P(</s> | state);
  start   int: the state after <s>.

The tables are built row by row from the shorter contexts (a context's row
is its longest proper suffix's row plus its back-off weight, overwritten
where the model has the n-gram), so a sequence's score along the tables is
what the ARPA model gives it word by word (`ArpaModel`), in natural logs.

Its size is S * V entries: a bigram over V labels has about V states; a
trigram one state per bigram. `token_lm` refuses tables over `max_entries`.
"""

import math
import os
from typing import NamedTuple

import numpy as np

from tf_transducer.decoding.lm import ArpaModel

LN10 = math.log(10.0)
UNKNOWN_LOG10 = -100.0  # an unseen word without <unk>, as ArpaModel


class TokenLm(NamedTuple):
    """The automaton of a token n-gram (see the module)."""

    goto: np.ndarray
    logp: np.ndarray
    final: np.ndarray
    start: int


def token_lm(
    arpa: str | os.PathLike[str] | ArpaModel,
    vocab_size: int,
    blank: int = 0,
    max_entries: int = 2**25,
) -> TokenLm:
    """The tables of an ARPA n-gram whose words are label ids.

    Args:
      arpa: the ARPA file (or an `ArpaModel` read from one). Its words are
        labels written as decimal ids ("7"), plus <s>, </s> and <unk>;
        other words are ignored.
      vocab_size: V, the joint's classes.
      blank: the blank class (its step keeps the state and scores 0).
      max_entries: the most S * V entries allowed (default 2^25: 256 MB of
        tables).

    Returns:
      `TokenLm`.
    """
    if not isinstance(vocab_size, int) or vocab_size < 2:
        raise ValueError(f"vocab_size must be an int >= 2, got {vocab_size!r}")
    if not isinstance(blank, int) or not 0 <= blank < vocab_size:
        raise ValueError(f"blank must be an int in [0, {vocab_size}), got {blank!r}")
    model = arpa if isinstance(arpa, ArpaModel) else ArpaModel(arpa)
    columns = {str(v): v for v in range(vocab_size) if v != blank}
    columns["</s>"] = vocab_size  # an extra column: the end of the sentence
    labels = set(columns) - {"</s>"}
    # The contexts a label sequence can reach: the model's n-grams shorter
    # than N over labels, <s> only first.
    contexts = sorted(
        (g for g in model.prob if len(g) < model.order
         and set(g[1:] if g[0] == "<s>" else g) <= labels),
        key=len,
    )  # fmt: skip
    states = [(), *(g for g in contexts if g)]
    index = {g: i for i, g in enumerate(states)}
    if len(states) * vocab_size > max_entries:
        raise ValueError(
            f"the token n-gram's tables would hold {len(states)} states x "
            f"{vocab_size} labels = {len(states) * vocab_size} entries, over "
            f"max_entries={max_entries}: use a lower order or a pruned model"
        )
    logp = np.empty([len(states), vocab_size + 1], np.float64)
    goto = np.zeros([len(states), vocab_size + 1], np.int64)
    logp[0] = model.prob.get(("<unk>",), UNKNOWN_LOG10)
    by_history: dict[tuple[str, ...], list[tuple[str, float]]] = {}
    for gram, value in model.prob.items():
        if gram[-1] in columns:  # (unigrams: the history ())
            by_history.setdefault(gram[:-1], []).append((gram[-1], value))
    for i, context in enumerate(states):
        if i:  # back off to the longest proper suffix that is a state
            suffix = next(
                index[context[s:]] for s in range(1, len(context) + 1)
                if context[s:] in index
            )  # fmt: skip
            logp[i] = logp[suffix] + model.backoff.get(context, 0.0)
            goto[i] = goto[suffix]
        for word, value in by_history.get(context, ()):
            logp[i, columns[word]] = value
        for word, column in columns.items():
            if context + (word,) in index:
                goto[i, column] = index[context + (word,)]
    logp *= LN10
    logp[:, blank] = 0.0
    goto[:, blank] = np.arange(len(states))
    start = index.get(("<s>",), 0)
    return TokenLm(
        goto=goto[:, :vocab_size].astype(np.int32),
        logp=logp[:, :vocab_size].astype(np.float32),
        final=logp[:, vocab_size].astype(np.float32),
        start=start,
    )


def check_token_lm(lm: object, vocab_size: int | None = None) -> None:
    """A clear error unless lm is a `TokenLm` (of vocab_size classes)."""
    if not isinstance(lm, TokenLm):
        raise ValueError(
            f"token_lm must be a TokenLm (decoding.token_lm), got {type(lm).__name__}"
        )
    if vocab_size is not None and lm.goto.shape[1] != vocab_size:
        raise ValueError(
            f"token_lm (the token n-gram) is made for {lm.goto.shape[1]} classes, "
            f"the model has {vocab_size}"
        )
