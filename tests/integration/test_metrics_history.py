# SPDX-License-Identifier: Apache-2.0
"""The per-sandbox metrics history (src/isolad/core/history.c): a fixed ring of samples the
monitor takes every 5 s, read through the Python SDK's Sandbox.metrics(start, end)
(GET /v1/sandboxes/{id}/metrics). The E2B side is tests/e2b/control.test.mjs."""

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sdk" / "python"))
import isola  # noqa: E402


def wait_samples(sb, start, n, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        m = sb.metrics(start=start)
        if len(m["samples"]) >= n:
            return m
        assert time.monotonic() < deadline, f"fewer than {n} samples after {timeout}s: {m}"
        time.sleep(0.5)


def test_history_keeps_samples_and_filters_by_range(isolad):
    c = isola.Client(socket_path=isolad.socket)
    t0 = time.time()
    sb = c.create_sandbox()
    try:
        sb.exec(["sh", "-c", "head -c 3000000 /dev/zero > /tmp/fill"])
        m = wait_samples(sb, t0 - 1, 2)
        assert m["period_s"] == 5 and m["max_samples"] == 720, m
        s = m["samples"]
        times = [x["time"] for x in s]
        assert times == sorted(times) and times[0] >= t0 - 1, times
        cpu = [x["cpu_seconds"] for x in s]
        assert cpu == sorted(cpu), "CPU time never goes back"
        assert all(x["memory_bytes"] > 0 and x["disk_bytes"] >= 0 for x in s), s

        # exactly the second sample
        one = sb.metrics(start=times[1], end=times[1])["samples"]
        assert [x["time"] for x in one] == [times[1]]
        # after the second: not the first
        later = [x["time"] for x in sb.metrics(start=times[1])["samples"]]
        assert times[0] not in later and times[1] in later
        # outside the sandbox's life: nothing
        assert sb.metrics(start=time.time() + 3600)["samples"] == []
        assert sb.metrics(start=0, end=t0 - 3600)["samples"] == []

        with pytest.raises(isola.InvalidError, match="unix seconds"):
            sb._t.json("GET", f"/v1/sandboxes/{sb.id}/metrics?start=yesterday")
    finally:
        sb.delete()
    with pytest.raises(isola.NotFoundError):
        sb.metrics()


def test_a_paused_sandbox_keeps_its_history_and_adds_nothing(isolad):
    c = isola.Client(socket_path=isolad.socket)
    t0 = time.time()
    sb = c.create_sandbox()
    try:
        wait_samples(sb, t0 - 1, 1)
        sb.pause()
        kept = sb.metrics(start=t0 - 1)["samples"]
        assert kept, "the history survives a pause"
        time.sleep(6)  # longer than one period: a running sandbox would have a new sample
        assert sb.metrics(start=t0 - 1)["samples"] == kept
    finally:
        sb.delete()
