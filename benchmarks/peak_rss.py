# SPDX-License-Identifier: Apache-2.0
"""Peak resident memory of a piece of work, from /proc (Linux): the RSS
before it, and the high-water mark after resetting it (/proc/self/clear_refs)
so that only the work's own peak counts."""


def status_bytes(key):
    """A "kB" field of /proc/self/status (e.g. "VmRSS:"), in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{key} not in /proc/self/status")


def start():
    """Resets the high-water mark; returns the RSS now."""
    before = status_bytes("VmRSS:")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    return before


def peak_above(before):
    """Bytes of the high-water mark above `before` (from start())."""
    return status_bytes("VmHWM:") - before
