# SPDX-License-Identifier: Apache-2.0
"""python -m tf_transducer.cli.launch: a localhost cluster of workers, each
with its own TF_CONFIG, under a timeout; the chief's exit code comes back;
a preempted cluster restarts."""

import json
import os
import subprocess
import sys

import pytest

from tf_transducer.cli import launch

# A stand-in worker: records its TF_CONFIG, then behaves as told by
# $BEHAVIOUR (a Python statement; `task` is its index).
WORKER = (
    "import json, os, sys, time; "
    "task = json.loads(os.environ['TF_CONFIG'])['task']['index']; "
    "open(os.path.join(sys.argv[1], f'config_{task}.json'), 'w')"
    ".write(os.environ['TF_CONFIG']); "
    "exec(os.environ['BEHAVIOUR'])"
)


def _launch(tmp_path, behaviour, *flags):
    argv = [sys.executable, "-m", "tf_transducer.cli.launch",
            f"--log_dir={tmp_path / 'logs'}", *flags,
            "--", "python", "-c", WORKER, str(tmp_path)]  # fmt: skip
    env = dict(os.environ, BEHAVIOUR=behaviour)
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)


def test_each_worker_gets_its_task_and_the_chief_code_returns(tmp_path):
    result = _launch(tmp_path, "sys.exit(3 if task == 0 else 0)", "--workers=3")
    assert result.returncode == 3, result.stderr
    configs = [json.loads((tmp_path / f"config_{i}.json").read_text())
               for i in range(3)]  # fmt: skip
    assert [c["task"] for c in configs] == [
        {"type": "worker", "index": i} for i in range(3)
    ]
    addresses = configs[0]["cluster"]["worker"]
    assert len(set(addresses)) == 3 and all(c["cluster"] == configs[0]["cluster"]
                                            for c in configs)  # fmt: skip
    assert (tmp_path / "logs" / "worker_1.log").exists()


def test_a_failed_worker_brings_down_a_hanging_peer_after_the_grace(tmp_path):
    # Worker 1 fails at once; the chief would wait for it for ever.
    result = _launch(
        tmp_path, "time.sleep(600) if task == 0 else sys.exit(1)", "--grace_s=1"
    )
    assert result.returncode == 128 + 9, result.stderr
    assert "worker exit codes [-9, 1]" in result.stderr


def test_timeout_kills_every_worker(tmp_path):
    result = _launch(tmp_path, "time.sleep(600)", "--timeout_s=2")
    assert result.returncode == launch.TIMED_OUT
    assert "killed the workers after 2 s" in result.stderr


def test_preempted_cluster_restarts(tmp_path):
    # 42 (saved on SIGTERM) the first time, done the second time.
    behaviour = (
        "mark = os.path.join(sys.argv[1], f'ran_{task}'); "
        "first = not os.path.exists(mark); open(mark, 'w'); "
        "sys.exit(42 if first else 0)"
    )
    result = _launch(tmp_path, behaviour, "--max_restarts=1")
    assert result.returncode == 0, result.stderr
    assert "restart 1 of 1" in result.stdout


def test_no_command_is_a_usage_error():
    result = subprocess.run(
        [sys.executable, "-m", "tf_transducer.cli.launch", "--workers=2"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode != 0
    assert "give the worker command after --" in result.stderr


@pytest.mark.parametrize("name", ["python", "python3", "/usr/bin/python3"])
def test_python_is_this_interpreter(name):
    assert launch.worker_command([name, "-m", "x"]) == [sys.executable, "-m", "x"]
