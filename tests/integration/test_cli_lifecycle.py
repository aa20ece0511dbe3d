# SPDX-License-Identifier: Apache-2.0
"""`isola create` lifecycle flags: --on-timeout, --idle-timeout, --[no-]auto-resume reach
isolad (judged by the sandbox isolad reports), and bad values are refused with the reason."""

import json


def test_create_with_lifecycle_flags(cli, api):
    cp = cli("create", "--on-timeout", "hibernate", "--idle-timeout", "600", "--no-auto-resume",
             "--ttl", "900", json=True)
    assert cp.returncode == 0, cp.stderr
    sid = json.loads(cp.stdout)["id"]
    try:
        r = api.request("GET", f"/v1/sandboxes/{sid}")
        sb = r.json()
        assert sb["on_timeout"] == "hibernate", sb
        assert sb["idle_timeout"] == 600, sb
        assert sb["auto_resume"] is False, sb
    finally:
        api.request("DELETE", f"/v1/sandboxes/{sid}")


def test_lifecycle_flag_errors_name_the_value(cli, api):
    before = {s["id"] for s in api.request("GET", "/v1/sandboxes").json()["sandboxes"]}
    cp = cli("create", "--on-timeout", "explode")
    assert cp.returncode != 0 and b"explode" in cp.stderr, cp
    cp = cli("create", "--idle-timeout", "soon")
    assert cp.returncode == 2 and b"--idle-timeout `soon`" in cp.stderr, cp
    cp = cli("run", "--on-timeout", "pause", "true")
    assert cp.returncode == 2, cp  # run's sandbox is destroyed after the command: no policy
    after = {s["id"] for s in api.request("GET", "/v1/sandboxes").json()["sandboxes"]}
    assert after == before, "a refused create leaves nothing behind"
