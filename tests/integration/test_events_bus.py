# SPDX-License-Identifier: Apache-2.0
"""GET /v1/events driven by the core's change bus: the stream rescans the tenant's list when a
sandbox changes, not on a timer (isola_events_scans_total in /metrics counts the scans)."""

import re

from tenancy_util import Tenant


def scans(api):
    r = api.request("GET", "/metrics")
    assert r.status == 200, r
    m = re.search(r"^isola_events_scans_total (\d+)$", r.text, re.M)
    assert m, "isola_events_scans_total missing from /metrics"
    return int(m.group(1))


def test_events_wait_for_a_change_instead_of_polling(isolad, api):
    t = Tenant(isolad)
    try:
        sb = t.client.create_sandbox(template="host")
        ev = t.client.stream("GET", "/v1/events", kind="sse", timeout=60)
        assert ev.status == 200
        assert ev.next_event()["type"] == "snapshot"
        before = scans(api)
        # Three seconds in which no sandbox changes (a command runs; that changes no state):
        # the 500 ms poll this replaced scanned about six times; the bus-driven stream does
        # not scan at all (one allowance each for a keep-alive rescan and an unrelated change).
        t.client.sh(sb["id"], "sleep 3")
        idle = scans(api) - before
        assert idle <= 2, f"{idle} list scans while nothing changed"
        # A change reaches the stream through the bus: the pause's events, and few scans.
        before = scans(api)
        r = t.client.request("POST", f"/v1/sandboxes/{sb['id']}/pause")
        assert r.status == 200, r
        ev.read_until(lambda e: e["type"] == "changed" and e["id"] == sb["id"] and
                      e["sandbox"]["state"] == "paused")
        assert t.client.delete_sandbox(sb["id"]).status == 204
        ev.read_until(lambda e: e["type"] == "destroyed" and e["id"] == sb["id"])
        assert scans(api) > before
    finally:
        t.cleanup()
