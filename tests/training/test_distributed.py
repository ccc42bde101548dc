# SPDX-License-Identifier: Apache-2.0
"""train_loop under MirroredStrategy and MultiWorkerMirroredStrategy (two
workers on 127.0.0.1, each a child process under a timeout) trains to the
weights of one process on the same global batches; a killed worker's
cluster, restarted, and a preempted (SIGTERM) process, restarted, end with
the uninterrupted run's weights; TF_CONFIG is checked."""

import json
import os
import signal
import socket
import subprocess
import sys

import numpy as np
import pytest

from tf_transducer.training import PREEMPTED_EXIT_CODE
from tf_transducer.training import distributed

SCRIPT = os.path.join(os.path.dirname(__file__), "distributed_check.py")
TIMEOUT = 240
RUN = ("epochs=3", "steps=3")  # 9 steps of 4 utterances, saved every 2


def _run(mode, out, model, *options, env=None):
    return subprocess.Popen(
        [sys.executable, SCRIPT, mode, str(out), model, *RUN, *options],
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(process, expect=0):
    try:
        output, _ = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()  # a worker whose peer never answers ignores SIGTERM
        output, _ = process.communicate()
        pytest.fail(f"worker timed out after {TIMEOUT} s:\n{output[-3000:]}")
    if expect == "failed":
        assert process.returncode != 0, output[-3000:]
    else:
        assert process.returncode == expect, output[-3000:]
    return output


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _cluster(out, model, *options):
    """Starts two workers on 127.0.0.1 (worker 0 is the chief)."""
    cluster = {"worker": [f"127.0.0.1:{p}" for p in _free_ports(2)]}
    return [
        _run(
            "worker",
            out,
            model,
            *options,
            env={
                "TF_CONFIG": json.dumps(
                    {"cluster": cluster, "task": {"type": "worker", "index": i}}
                )
            },
        )  # fmt: skip
        for i in range(2)
    ]


def _assert_same_training(got, want):
    """[last epoch's loss, validation loss, weights...] of two runs."""
    np.testing.assert_allclose(got[:2], want[:2], rtol=1e-5)
    assert np.abs(got[2:] - want[2:]).max() < 1e-6


_REFERENCES = {}


def _one_process(model, tmp_path_factory):
    """The uninterrupted one-process run of a model (once per module)."""
    if model not in _REFERENCES:
        out = tmp_path_factory.mktemp("single") / "weights.npy"
        _finish(_run("single", out, model))
        _REFERENCES[model] = np.load(out)
    return _REFERENCES[model]


@pytest.fixture(scope="module", params=["transducer", "deepspeech"])
def one_process(request, tmp_path_factory):
    return request.param, _one_process(request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def transducer_run(tmp_path_factory):
    # One model is enough for the replica, fault-tolerance and preemption paths.
    return _one_process("transducer", tmp_path_factory)


def test_two_replicas_train_to_one_process_weights(transducer_run, tmp_path):
    model, want = "transducer", transducer_run
    # Keras divides each replica's loss by the number of replicas and the
    # optimizer sums their gradients: scaling again in the loop would halve
    # every update.
    _finish(_run("mirrored", tmp_path / "w.npy", model))
    _assert_same_training(np.load(tmp_path / "w.npy"), want)


def test_two_workers_train_to_one_process_weights(one_process, tmp_path):
    model, want = one_process
    for worker in _cluster(tmp_path / "w.npy", model):
        _finish(worker)
    # The validation loss is reduced over uneven shards (3 + 2 utterances).
    _assert_same_training(np.load(tmp_path / "w.npy"), want)


def test_two_workers_in_float64_agree_to_rounding(tmp_path):
    # In float64 the only difference left is the order of the sums.
    _finish(_run("single", tmp_path / "one.npy", "transducer", "dtype=float64"))
    for worker in _cluster(tmp_path / "two.npy", "transducer", "dtype=float64"):
        _finish(worker)
    one, two = np.load(tmp_path / "one.npy"), np.load(tmp_path / "two.npy")
    np.testing.assert_allclose(two[:2], one[:2], rtol=1e-12)
    assert np.abs(two[2:] - one[2:]).max() < 1e-12


def test_killed_worker_then_restarted_cluster_trains_as_if_uninterrupted(
    transducer_run, tmp_path
):
    model, want = "transducer", transducer_run
    options = (
        f"ckpt={tmp_path / 'ckpt'}",
        f"die=KILL:1:3:{tmp_path / 'mark'}",  # worker 1, epoch 2, its 4th item
    )
    first = _cluster(tmp_path / "w.npy", model, *options)
    _finish(first[1], expect=-signal.SIGKILL)
    # Its peer fails within the collective timeout instead of hanging.
    output = _finish(first[0], expect="failed")
    assert not (tmp_path / "w.npy").exists(), output[-2000:]
    saved = sorted(p.name for p in (tmp_path / "ckpt").iterdir())
    assert "checkpoint" in saved and "model.json" in saved, saved
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "mark"]
    for worker in _cluster(tmp_path / "w.npy", model, *options):
        _finish(worker)
    _assert_same_training(np.load(tmp_path / "w.npy"), want)


def test_sigterm_saves_exits_for_restart_and_resumes_exactly(transducer_run, tmp_path):
    model, want = "transducer", transducer_run
    options = (f"ckpt={tmp_path / 'ckpt'}", f"die=TERM:1:5:{tmp_path / 'mark'}")
    # PreemptionCheckpointHandler saves at the next step and exits with the
    # code a supervisor restarts on.
    _finish(_run("single", tmp_path / "w.npy", model, *options),
            expect=PREEMPTED_EXIT_CODE)  # fmt: skip
    assert not (tmp_path / "w.npy").exists()
    assert (tmp_path / "ckpt" / "checkpoint").exists()
    output = _finish(_run("single", tmp_path / "w.npy", model, *options))
    np.testing.assert_array_equal(np.load(tmp_path / "w.npy"), want, output[-2000:])


W0 = {"type": "worker", "index": 0}


def _config(cluster, task=W0):
    return json.dumps({"cluster": cluster, "task": task})


@pytest.mark.parametrize(
    "text,message",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        (json.dumps({"task": W0}), 'needs "cluster"'),
        (json.dumps({"cluster": {"worker": ["a:1"]}}), 'needs "task"'),
        (_config({"worker": []}), "non-empty list"),
        (_config({"worker": ["a:1", "b"]}), "not host:port"),
        (_config({"worker": ["a:1", "a:1"]}), "names a:1 twice"),
        (_config({"worker": ["a:1", "b:2"]}, {"type": "worker", "index": 2}), "not in"),
        (_config({"worker": ["a:1"]}, {"type": "chief", "index": 0}), "not in"),
    ],
)
def test_bad_tf_config_is_named(text, message):
    with pytest.raises(distributed.ClusterConfigError, match=message) as error:
        distributed.cluster_from_environment({"TF_CONFIG": text})
    assert "TF_CONFIG" in str(error.value)


def test_tf_config_unset_or_valid():
    assert distributed.cluster_from_environment({}) is None
    config = {
        "cluster": {"worker": ["h:1", "h:2"]},
        "task": {"type": "worker", "index": 1},
    }
    cluster, job, index = distributed.cluster_from_environment(
        {"TF_CONFIG": json.dumps(config)}
    )
    assert (cluster, job, index) == (config["cluster"], "worker", 1)


def test_shards_are_disjoint_and_cover_the_items():
    items = list(range(11))
    shards = [distributed.shard_items(items, 3, i) for i in range(3)]
    assert sorted(sum(shards, [])) == items
    assert all(not set(a) & set(b) for a in shards for b in shards if a is not b)
    with pytest.raises(ValueError, match="shard index"):
        distributed.shard_items(items, 3, 3)
