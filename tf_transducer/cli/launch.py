# SPDX-License-Identifier: Apache-2.0
r"""A cluster of training workers on this machine.

For trying multi-worker training, and for tests: picks free ports, gives
each worker its TF_CONFIG, and returns the chief's exit code.

  python -m tf_transducer.cli.launch --workers 2 -- \
      python -m tf_transducer.cli.transducer train --train_files a.csv ...

The command after `--` runs once per worker (a leading `python` is this
interpreter). Worker 0, the chief, writes to this terminal; the others to
--log_dir/worker_<i>.log. Every worker runs under --timeout_s (then it is
killed: a worker whose peers never start blocks and ignores SIGTERM); when
one fails, the others get --grace_s to fail too before they are killed.
SIGTERM / Ctrl-C here is passed on to the workers, which save a checkpoint
and exit with PREEMPTED_EXIT_CODE (42); --max_restarts restarts a cluster
that ended so.

Across real machines, run the same command on each host with its own
TF_CONFIG (see docs/guides/distributed.md).
"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

from tf_transducer.cli import define
from tf_transducer.cli import flag_group
from tf_transducer.cli import run as run_app

PREEMPTED_EXIT_CODE = 42  # tf_transducer.training.PREEMPTED_EXIT_CODE
TIMED_OUT = 124
_SIGNALLED = []  # signals this launcher passed on (no restart then)

flag_group("cluster")
define("integer", "workers", 2, "Workers to start.", lower_bound=1)
define("float", "timeout_s", 24 * 3600.0, "Kill every worker after this long.")
define("float", "grace_s", 30.0, "After a worker fails, wait this long for the rest.")
define("string", "log_dir", "", "Non-chief workers' logs (default: a temp folder).")
define("integer", "max_restarts", 0, "Restarts of a preempted cluster.", lower_bound=0)
FLAGS = flags.FLAGS


def free_ports(n):
    """n free TCP ports on 127.0.0.1."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def tf_configs(n, ports=None):
    """The TF_CONFIG of each of n workers on 127.0.0.1."""
    ports = ports or free_ports(n)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    return [
        json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})
        for i in range(n)
    ]


def worker_command(command):
    """The command after `--`, with a leading `python` made this interpreter."""
    if not command:
        raise app.UsageError("give the worker command after --")
    if os.path.basename(command[0]) in ("python", "python3"):
        return [sys.executable, *command[1:]]
    return list(command)


def run_cluster(command, workers, timeout_s, grace_s, log_dir):
    """Runs one cluster to its end; returns the chief's exit code.

    The code is 124 when the timeout killed the chief, 128 + N when signal N
    did.
    """
    processes, logs = [], []
    try:
        for i, config in enumerate(tf_configs(workers)):
            env = dict(os.environ, TF_CONFIG=config)
            out = None
            if i:
                out = open(os.path.join(log_dir, f"worker_{i}.log"), "w")  # noqa: SIM115
                logs.append(out)
            processes.append(subprocess.Popen(command, env=env, stdout=out, stderr=out))

        def forward(signum, frame):
            _SIGNALLED.append(signum)
            for p in processes:
                p.send_signal(signum)

        previous = {
            s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)
        }
        deadline, failed_at = time.monotonic() + timeout_s, None
        try:
            while any(p.poll() is None for p in processes):
                now = time.monotonic()
                codes = [p.poll() for p in processes]
                if failed_at is None and any(c not in (None, 0) for c in codes):
                    failed_at = now
                if now > deadline or (failed_at and now > failed_at + grace_s):
                    for p in processes:
                        if p.poll() is None:
                            p.kill()
                    if now > deadline:
                        print(f"launch: killed the workers after {timeout_s:.0f} s",
                              file=sys.stderr)  # fmt: skip
                        for p in processes:
                            p.wait()
                        return TIMED_OUT
                time.sleep(0.2)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
        codes = [p.wait() for p in processes]
        if any(codes[1:]):
            print(f"launch: worker exit codes {codes}; logs in {log_dir}",
                  file=sys.stderr)  # fmt: skip
        # A chief killed by signal N exits 128 + N, as from a shell.
        return codes[0] if codes[0] >= 0 else 128 - codes[0]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
                p.wait()
        for out in logs:
            out.close()


def main(argv):
    """Runs the command after `--` as a cluster; exits with the chief's code.

    A cluster preempted (PREEMPTED_EXIT_CODE) is restarted up to
    --max_restarts times, unless this launcher itself was signalled.
    """
    command = worker_command(argv[1:])
    log_dir = FLAGS.log_dir or tempfile.mkdtemp(prefix="tf_transducer_launch_")
    os.makedirs(log_dir, exist_ok=True)
    for attempt in range(FLAGS.max_restarts + 1):
        if attempt:
            print(f"launch: restart {attempt} of {FLAGS.max_restarts}", flush=True)
        code = run_cluster(
            command, FLAGS.workers, FLAGS.timeout_s, FLAGS.grace_s, log_dir
        )
        if code != PREEMPTED_EXIT_CODE or _SIGNALLED:
            break
    sys.exit(code)


def run():
    """The `tf-transducer-launch` console script."""
    run_app(main)


if __name__ == "__main__":
    run()
