# SPDX-License-Identifier: Apache-2.0
"""Prometheus /metrics checked with Debian's promtool, counters that move with the workload,
per-sandbox resource samples, and the structured JSON log."""

import json
import re
import shutil
import subprocess
import time

import pytest

import isola_client as ic


def metrics(api):
    r = api.request("GET", "/metrics")
    assert r.status == 200, r
    assert r.headers.get("Content-Type", "").startswith("text/plain; version=0.0.4"), r.headers
    return r.text


def value(text, name, labels=""):
    m = re.search(r"^" + re.escape(name + labels) + r" ([0-9.eE+-]+)$", text, re.M)
    assert m, f"{name}{labels} not in metrics:\n{text}"
    return float(m.group(1))


def test_promtool_accepts_metrics(api, sandbox, tmp_path):
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.fail("promtool is missing: install Debian's `prometheus` package "
                    "(scripts/deps.sh)", pytrace=False)
    api.exec(sandbox["id"], cmd=["true"])
    api.request("GET", "/v1/sandboxes/nosuch0000")
    text = metrics(api)
    cp = subprocess.run([promtool, "check", "metrics"], input=text.encode(),
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    assert cp.returncode == 0, f"promtool: {cp.stdout.decode()} {cp.stderr.decode()}"
    for name in ("isola_sandboxes", "isola_sandbox_create_seconds_bucket",
                 "isola_commands_total", "isola_api_errors_total",
                 "isola_admission_refusals_total", "isola_pool_sandboxes"):
        assert name in text, name
    assert value(text, "isola_pool_sandboxes") == 0


def test_counters_follow_the_workload(api, sandbox):
    before = metrics(api)
    api.exec(sandbox["id"], cmd=["true"])
    api.exec(sandbox["id"], cmd=["true"])
    api.request("GET", "/v1/sandboxes/nosuch0000")
    after = metrics(api)
    assert value(after, "isola_commands_total", '{kind="exec"}') == \
        value(before, "isola_commands_total", '{kind="exec"}') + 2
    # A response is counted when libmicrohttpd reports it complete, which can be just after
    # the client has read it: poll (seen under load: the next scrape came first).
    ic.wait_for(lambda: value(metrics(api), "isola_api_errors_total", '{code="not_found"}') >=
                value(before, "isola_api_errors_total", '{code="not_found"}') + 1, 10,
                what="the not_found response counted")
    running = len([s for s in api.list_sandboxes() if s["state"] == "running"])
    assert value(after, "isola_sandboxes", '{state="running",tier="process"}') >= running
    assert value(after, "isola_sandbox_create_seconds_count") >= 1


def test_metrics_need_the_token_on_tcp(isolad):
    assert isolad.tcp_client().request("GET", "/metrics").status == 401
    assert isolad.tcp_client(token=isolad.token).request("GET", "/metrics").status == 200


def test_sandbox_stats_samples(api, sandbox):
    sid = sandbox["id"]
    s1 = api.get_json(f"/v1/sandboxes/{sid}/stats")
    for k in ("time", "cpu_seconds", "memory_bytes", "memory_limit_bytes", "disk_bytes",
              "disk_limit_bytes", "pids", "oom_kills"):
        assert k in s1, (k, s1)
    assert s1["memory_limit_bytes"] == sandbox["memory"]
    # Every sandbox has a network now (docs/network.md): its counters come with the stats.
    assert isinstance(s1["network"], dict) and "tx_bytes" in s1["network"], s1
    api.exec(sid, cmd=["sh", "-c", "dd if=/dev/zero of=/tmp/f bs=1M count=8 2>/dev/null; "
                       "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
    time.sleep(0.2)
    s2 = api.get_json(f"/v1/sandboxes/{sid}/stats")
    assert s2["time"] > s1["time"]
    assert s2["cpu_seconds"] > s1["cpu_seconds"], (s1, s2)
    assert s2["disk_bytes"] >= s1["disk_bytes"] + 8 * 1024 * 1024 - 4096, (s1, s2)
    assert api.request("GET", "/v1/sandboxes/nosuch0000/stats").status == 404


def test_logs_are_json_lines(isolad):
    lines = [ln for ln in isolad.log_text().splitlines() if ln.startswith("{")]
    assert lines
    for ln in lines[:200]:
        rec = json.loads(ln)
        assert {"ts", "level", "msg"} <= set(rec), rec
