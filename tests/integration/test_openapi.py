# SPDX-License-Identifier: Apache-2.0
"""docs/openapi.yaml against what isolad serves: the route table in src/isolad/api/server.c
both ways, and live responses carrying the fields the spec declares required."""

import re
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "docs" / "openapi.yaml"
SERVER_C = REPO / "src" / "isolad" / "api" / "server.c"
METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


def norm(path):
    """/v1/sandboxes/{id} and /v1/sandboxes/{sandbox_id} are the same route."""
    return re.sub(r"\{[^}]*\}|:[A-Za-z_]\w*|\*", "{}", path.rstrip("/") or "/")


@pytest.fixture(scope="module")
def spec():
    try:
        import yaml
    except ImportError:
        pytest.fail("python3-yaml is not installed: add it to scripts/deps.sh", pytrace=False)
    assert SPEC.is_file(), f"{SPEC} is missing (the API's contract must be documented)"
    with open(SPEC) as f:
        doc = yaml.safe_load(f)
    assert isinstance(doc, dict) and str(doc.get("openapi", "")).startswith("3"), \
        "docs/openapi.yaml is not an OpenAPI 3 document"
    return doc


def served_routes():
    assert SERVER_C.is_file(), f"{SERVER_C} is missing"
    src = SERVER_C.read_text()
    m = re.search(r"/\*\s*ROUTES-BEGIN\s*\*/(.*?)/\*\s*ROUTES-END\s*\*/", src, re.S)
    table = m.group(1) if m else src
    found = set()
    for meth, path in re.findall(
            r'\b(?:ROUTE\w*\s*\(|\{)\s*"(GET|PUT|POST|DELETE|PATCH|HEAD|OPTIONS)"\s*,\s*"(/[^"]*)"',
            table):
        found.add((meth.upper(), norm(path)))
    assert found, "no routes parsed from server.c (did the table's shape change?)"
    return found


def documented_routes(spec):
    found = set()
    for path, item in (spec.get("paths") or {}).items():
        for meth in METHODS:
            if meth in (item or {}):
                found.add((meth.upper(), norm(path)))
    return found


def test_every_served_route_is_documented(spec):
    served = {r for r in served_routes() if r[1].startswith("/v1")}
    missing = sorted(served - documented_routes(spec))
    assert not missing, f"served but not in docs/openapi.yaml: {missing}"


def test_every_documented_route_is_served(spec):
    documented = {r for r in documented_routes(spec) if r[1].startswith("/v1")}
    missing = sorted(documented - served_routes())
    assert not missing, f"documented in docs/openapi.yaml but not served: {missing}"


def resolve(spec, node, depth=0):
    assert depth < 32, "reference loop in the spec"
    if isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/"), f"external $ref not supported: {ref}"
        cur = spec
        for part in ref[2:].split("/"):
            cur = cur[part.replace("~1", "/").replace("~0", "~")]
        return resolve(spec, cur, depth + 1)
    return node


def required_fields(spec, schema):
    """Required property names of an object schema (allOf merged)."""
    schema = resolve(spec, schema)
    req = set(schema.get("required", []))
    for sub in schema.get("allOf", []):
        req |= required_fields(spec, sub)
    return req


def check_against(spec, schema, value, where):
    schema = resolve(spec, schema)
    if schema.get("type") == "array" or "items" in schema:
        assert isinstance(value, list), f"{where}: expected an array, got {value!r:.200}"
        for i, v in enumerate(value[:5]):
            check_against(spec, schema.get("items", {}), v, f"{where}[{i}]")
        return
    if schema.get("type") == "object" or "properties" in schema or "required" in schema or \
            "allOf" in schema:
        assert isinstance(value, dict), f"{where}: expected an object, got {value!r:.200}"
        missing = required_fields(spec, schema) - set(value)
        assert not missing, f"{where}: live response lacks required {sorted(missing)}: {value}"
        props = dict(schema.get("properties", {}))
        for sub in schema.get("allOf", []):
            props.update(resolve(spec, sub).get("properties", {}))
        for k, sub in props.items():
            if k in value and value[k] is not None:
                check_against(spec, sub, value[k], f"{where}.{k}")


def response_schema(spec, method, path, status):
    paths = spec["paths"]
    item = next((v for k, v in paths.items() if norm(k) == norm(path)), None)
    assert item is not None, f"{path} not documented"
    op = item.get(method.lower())
    assert op is not None, f"{method} {path} not documented"
    resp = op.get("responses", {})
    r = resp.get(str(status), resp.get(status))
    assert r is not None, f"{method} {path}: status {status} not documented"
    r = resolve(spec, r)
    content = r.get("content", {})
    js = content.get("application/json")
    assert js and "schema" in js, f"{method} {path} {status}: no application/json schema"
    return js["schema"]


def test_live_responses_have_required_fields(spec, api, sandbox):
    sid = sandbox["id"]
    samples = [
        ("GET", "/v1/health", "/v1/health", None, 200),
        ("GET", "/v1/sandboxes", "/v1/sandboxes", None, 200),
        ("GET", "/v1/sandboxes/{id}", f"/v1/sandboxes/{sid}", None, 200),
        ("POST", "/v1/sandboxes/{id}/exec", f"/v1/sandboxes/{sid}/exec", {"cmd": ["true"]}, 200),
        ("GET", "/v1/sandboxes/{id}/processes", f"/v1/sandboxes/{sid}/processes", None, 200),
        ("GET", "/v1/sandboxes/{id}/fs/stat", f"/v1/sandboxes/{sid}/fs/stat?path=/tmp", None,
         200),
        ("GET", "/v1/sandboxes/{id}/fs/list", f"/v1/sandboxes/{sid}/fs/list?path=/", None, 200),
        ("GET", "/v1/templates", "/v1/templates", None, 200),
        ("GET", "/v1/sandboxes/{id}", "/v1/sandboxes/nonexistent-id", None, 404),
    ]
    problems = []
    for method, spec_path, live_path, body, status in samples:
        r = api.request(method, live_path, json=body)
        try:
            assert r.status == status, (live_path, r)
            schema = response_schema(spec, method, spec_path, status)
            check_against(spec, schema, r.json(), f"{method} {spec_path} {status}")
        except AssertionError as e:
            problems.append(str(e)[:600])
    # And the create response.
    r = api.request("POST", "/v1/sandboxes", json={"labels": {"openapi": "1"}})
    assert r.status == 201, r
    try:
        check_against(spec, response_schema(spec, "POST", "/v1/sandboxes", 201), r.json(),
                      "POST /v1/sandboxes 201")
    except AssertionError as e:
        problems.append(str(e)[:600])
    finally:
        api.delete_sandbox(r.json()["id"])
    assert not problems, "\n".join(problems)


def test_error_schema_documented(spec):
    """Every operation documents its errors with the shared {code, message} schema."""
    bad = []
    for path, item in spec["paths"].items():
        for meth in METHODS:
            op = (item or {}).get(meth)
            if not op or path == "/v1/health":
                continue
            codes = [str(c) for c in op.get("responses", {})]
            if not any(c.startswith(("4", "5")) or c == "default" for c in codes):
                bad.append(f"{meth.upper()} {path}")
    assert not bad, f"operations without any documented error response: {bad}"
