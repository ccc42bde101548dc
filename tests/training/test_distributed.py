"""train_loop under MirroredStrategy and MultiWorkerMirroredStrategy (two
workers on 127.0.0.1, each a child process under a timeout) trains to the
weights of one process on the same global batch; TF_CONFIG is checked."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from tf_transducer.training import distributed

SCRIPT = os.path.join(os.path.dirname(__file__), "distributed_check.py")
TIMEOUT = 240


def _run(mode, out, model, env=None):
    return subprocess.Popen(
        [sys.executable, SCRIPT, mode, str(out), model],
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(process):
    try:
        output, _ = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()  # a worker whose peer never answers ignores SIGTERM
        output, _ = process.communicate()
        pytest.fail(f"worker timed out after {TIMEOUT} s:\n{output[-3000:]}")
    assert process.returncode == 0, output[-3000:]


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.fixture(scope="module", params=["transducer", "deepspeech"])
def one_process(request, tmp_path_factory):
    out = tmp_path_factory.mktemp("single") / "weights.npy"
    _finish(_run("single", out, request.param))
    return request.param, np.load(out)


def test_two_replicas_train_to_one_process_weights(one_process, tmp_path):
    model, one_process = one_process
    # Keras divides each replica's loss by the number of replicas and the
    # optimizer sums their gradients: scaling again in the loop would halve
    # every update.
    _finish(_run("mirrored", tmp_path / "w.npy", model))
    got = np.load(tmp_path / "w.npy")
    assert abs(got[0] - one_process[0]) <= 1e-5 * abs(one_process[0])  # loss
    np.testing.assert_allclose(got[1:], one_process[1:], atol=1e-6)
    assert np.abs(got[1:] - one_process[1:]).max() < 1e-6


def test_two_workers_train_to_one_process_weights(one_process, tmp_path):
    model, one_process = one_process
    ports = _free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    workers = [
        _run(
            "worker",
            tmp_path / "w.npy",
            model,
            {
                "TF_CONFIG": json.dumps(
                    {"cluster": cluster, "task": {"type": "worker", "index": i}}
                )
            },
        )
        for i in range(2)
    ]
    for worker in workers:
        _finish(worker)
    got = np.load(tmp_path / "w.npy")
    assert abs(got[0] - one_process[0]) <= 1e-5 * abs(one_process[0])
    np.testing.assert_allclose(got[1:], one_process[1:], atol=1e-6)


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
