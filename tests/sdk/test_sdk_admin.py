# SPDX-License-Identifier: Apache-2.0
"""Python SDK: stats, metrics, whoami, tokens, tenants and quotas, audit, compliance."""

import pytest

import isola


def test_stats_whoami_metrics_compliance(client, sb):
    st = sb.stats()
    assert st["id"] == sb.id and st["pids"] >= 1 and st["memory_limit_bytes"] > 0
    me = client.whoami()
    assert me["role"] == "admin" and me["tenant"] == "default"
    assert "# TYPE isola_sandboxes gauge" in client.metrics()
    comp = client.compliance()
    assert {"tiers", "audit", "tokens"} <= set(comp)
    with pytest.raises(isola.NotFoundError):
        client.sandbox("nosuchsandbox").stats()


def test_audit(client, sb):
    v = client.audit_verify()
    assert v["ok"] is True and v["records"] >= 1 and v["problems"] == []
    recs = list(client.audit_export())
    assert recs and all(isinstance(r, dict) for r in recs)
    assert any(sb.id in str(r) for r in recs), "the sandbox's creation is audited"


def test_tenant_token_and_quota(client, isolad):
    t = client.create_tenant("sdk-tenant", max_sandboxes=1)
    try:
        assert t["name"] == "sdk-tenant" and t["quota"]["max_sandboxes"] == 1
        assert "sdk-tenant" in [x["name"] for x in client.list_tenants()]
        t = client.update_tenant("sdk-tenant", max_cpu=4)
        assert t["quota"]["max_cpu"] == 4 and t["quota"]["max_sandboxes"] == 1
        assert client.get_tenant("sdk-tenant")["quota"]["max_cpu"] == 4
        tok = client.create_token(tenant="sdk-tenant", role="user", name="sdk")
        assert tok["token"] and tok["tenant"] == "sdk-tenant"
        assert tok["id"] in [x["id"] for x in client.list_tokens(tenant="sdk-tenant")]
        assert all("token" not in x for x in client.list_tokens())
        tc = isola.Client(url=isolad.url, token=tok["token"], timeout=30)
        me = tc.whoami()
        assert (me["tenant"], me["role"]) == ("sdk-tenant", "user")
        sb = tc.create_sandbox()
        try:
            with pytest.raises(isola.QuotaExceededError) as ei:
                tc.create_sandbox()
            assert ei.value.status == 403 and isinstance(ei.value, isola.ForbiddenError)
            with pytest.raises(isola.ConflictError):
                client.delete_tenant("sdk-tenant")  # owns a sandbox
        finally:
            sb.delete()
        client.revoke_token(tok["id"])
        with pytest.raises(isola.UnauthorizedError):
            tc.list_sandboxes()
    finally:
        client.delete_tenant("sdk-tenant")
    with pytest.raises(isola.NotFoundError):
        client.get_tenant("sdk-tenant")
