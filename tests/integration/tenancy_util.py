# SPDX-License-Identifier: Apache-2.0
"""Helpers shared by the tenancy, quota, audit and metrics tests: tenants with tokens over TCP."""

import importlib.util
import uuid
from pathlib import Path

import isola_client as ic

# tests/conftest.py under a name of its own (both conftest files are "conftest" to pytest,
# which keeps one of them in sys.modules at a time; tests/security/seclib.py does the same).
_spec = importlib.util.spec_from_file_location(
    "isola_tests_conftest_tenancy", Path(__file__).resolve().parents[1] / "conftest.py")
ROOT_CONFTEST = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ROOT_CONFTEST)


class Tenant:
    """A tenant created through the unix socket (the operator) and a token for it."""

    def __init__(self, isolad, role="user", **quota):
        self.isolad = isolad
        self.admin = isolad.client(timeout=60)
        self.name = f"t-{uuid.uuid4().hex[:10]}"
        r = self.admin.request("POST", "/v1/tenants", json=dict(name=self.name, **quota))
        assert r.status == 201, r
        self.tokens = []
        self.token = self.new_token(role)
        self.client = isolad.tcp_client(token=self.token, timeout=60)

    def new_token(self, role="user", name="test"):
        r = self.admin.request("POST", "/v1/tokens",
                               json={"tenant": self.name, "role": role, "name": name})
        assert r.status == 201, r
        tok = r.json()
        self.tokens.append(tok)
        return tok["token"]

    def tcp(self, token=None, **kw):
        return self.isolad.tcp_client(token=token or self.token, **kw)

    def cleanup(self):
        """Destroys what the tenant owns, then the tenant (its tokens go with it)."""
        try:
            r = self.client.request("GET", "/v1/sandboxes")
            if r.status == 200:
                for sb in ic.sandbox_list(r.json()):
                    self.client.delete_sandbox(sb["id"])
            r = self.admin.request("DELETE", f"/v1/tenants/{self.name}")
            assert r.status in (204, 404), r
        except OSError:
            pass
