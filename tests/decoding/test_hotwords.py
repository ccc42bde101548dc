# SPDX-License-Identifier: Apache-2.0
"""Hotwords: the automaton against brute force, and boosting in the graph searches."""

import numpy as np
import pytest

from tests.decoding.test_graph_greedy import table_steps
from tests.decoding.test_transducer_decoding import frames
from tests.decoding.test_transducer_decoding import log_softmax
from tf_transducer.data import CharacterAlphabet
from tf_transducer.decoding.graph_beam import modified_beam_graph
from tf_transducer.decoding.graph_greedy import label_looping_greedy
from tf_transducer.decoding.hotwords import hotword_graph
from tf_transducer.decoding.hotwords import read_hotwords

V = 5


def brute_force(phrases, score, labels):
    """Running boost after each label: completed occurrences (each phrase
    ending there, overlaps included; a phrase given twice counts once) + the
    longest partial match."""
    phrases = sorted({tuple(p) for p in phrases})
    prefixes = {tuple(p[:i]) for p in phrases for i in range(1, len(p) + 1)}
    done, out = 0.0, []
    for n in range(1, len(labels) + 1):
        seen = labels[:n]
        done += sum(score * len(p) for p in phrases if tuple(seen[-len(p) :]) == p)
        partial = max(
            (k for k in range(1, n + 1) if tuple(seen[n - k :]) in prefixes), default=0
        )
        out.append(done + score * partial)
    return out, done


@pytest.mark.parametrize("seed", range(6))
def test_automaton_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    phrases = [list(rng.integers(1, V, size=rng.integers(1, 4))) for _ in range(4)]
    graph = hotword_graph(phrases, V, scores=0.5)
    for _ in range(20):
        labels = list(rng.integers(0, V, size=12))
        state, total, running = 0, 0.0, []
        for y in labels:
            total += graph.delta[state, y]
            state = graph.goto[state, y]
            running.append(total)
        text = [y for y in labels if y != 0]  # the blank changes nothing
        want, done = brute_force(phrases, 0.5, text)
        got = [r for r, y in zip(running, labels, strict=True) if y != 0]
        np.testing.assert_allclose(got, want, atol=1e-5)
        # At the end the partial match is taken back: completed phrases stay.
        np.testing.assert_allclose(total - graph.depth[state], done, atol=1e-5)


def test_bad_phrases_are_named(tmp_path):
    with pytest.raises(ValueError, match=r"phrases\[1\]"):
        hotword_graph([[1, 2], [0, 1]], V)
    with pytest.raises(ValueError, match=r"scores\[0\]"):
        hotword_graph([[1]], V, scores=[-1.0])
    with pytest.raises(ValueError, match="scores must be one number or one per"):
        hotword_graph([[1]], V, scores=[1.0, 2.0])
    path = tmp_path / "hot.txt"
    path.write_text("ab\nba :x\n")
    with pytest.raises(ValueError, match="hot.txt:2: the score after"):
        read_hotwords(str(path), CharacterAlphabet.english())


def test_hotword_file(tmp_path):
    path = tmp_path / "hot.txt"
    path.write_text("# names\nbob :3.5\n\nalice\n")
    alphabet = CharacterAlphabet.english()
    phrases, scores = read_hotwords(str(path), alphabet, score=2.0)
    assert phrases == [alphabet.encode("bob"), alphabet.encode("alice")]
    assert scores == [3.5, 2.0]


def one_label_table(frame_logits):
    """Tables [1, T, N, V, V] whose logits depend on the frame only."""
    table = np.asarray(frame_logits, np.float32)[None, :, None, None, :]
    return np.broadcast_to(table, (1, len(frame_logits), 6, V, V)).copy()


# Frame 0: label 1 for sure; frame 1: label 2 a little likelier than 3;
# frames 2, 3: blank.
FRAMES = [[-9, 5, -9, -9, -9], [0, -9, 1.0, 0.6, -9], [5, -9, -9, -9, -9],
          [5, -9, -9, -9, -9]]  # fmt: skip


def search(kind, tokens, graph):
    steps, lengths = table_steps(tokens), np.array([tokens.shape[1]])
    if kind == "greedy":
        return label_looping_greedy(
            frames(1, tokens.shape[1]), lengths, steps, max_symbols_per_frame=1,
            hotwords=graph,
        )  # fmt: skip
    return modified_beam_graph(
        frames(1, tokens.shape[1]), lengths, steps, 3, hotwords=graph
    )


def path_score(tokens, labels_per_frame):
    """log-prob of one label (or blank) per frame, as the tables give it."""
    total, n, last = 0.0, 0, 0
    for t, y in enumerate(labels_per_frame):
        total += log_softmax(tokens[0, t, min(n, 5), last])[y]
        if y:
            n, last = n + 1, y
    return total


@pytest.mark.parametrize("kind", ["greedy", "beam"])
def test_boost_fixes_a_word_and_gives_partial_matches_back(kind):
    tokens = one_label_table(FRAMES)
    plain = search(kind, tokens, None)
    assert plain.labels[0, : plain.label_length[0]].numpy().tolist() == [1, 2]
    fixed = search(kind, tokens, hotword_graph([[1, 3]], V, scores=1.0))
    assert fixed.labels[0, : fixed.label_length[0]].numpy().tolist() == [1, 3]
    # the completed phrase keeps its boost: 2 labels x 1.0
    np.testing.assert_allclose(
        fixed.scores[0], path_score(tokens, [1, 3, 0, 0]) + 2.0, rtol=1e-5
    )
    # [1, 4] is matched as far as 1, then broken by a 2 the model is sure
    # of: the boost of the 1 is taken back.
    tokens[0, 1, :, :, 2] = 4.0
    plain = search(kind, tokens, None)
    broken = search(kind, tokens, hotword_graph([[1, 4]], V, scores=1.0))
    assert broken.labels[0, : broken.label_length[0]].numpy().tolist() == [1, 2]
    np.testing.assert_allclose(broken.scores[0], plain.scores[0], rtol=1e-5)


@pytest.mark.parametrize("kind", ["greedy", "beam"])
def test_a_phrase_not_spoken_is_not_inserted(kind):
    tokens = one_label_table(FRAMES)
    got = search(kind, tokens, hotword_graph([[4, 4]], V, scores=2.0))
    assert got.labels[0, : got.label_length[0]].numpy().tolist() == [1, 2]
