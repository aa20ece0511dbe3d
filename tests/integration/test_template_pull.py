# SPDX-License-Identifier: Apache-2.0
"""`isola template pull` and POST /v1/templates/pull against Debian's docker-registry run on a
loopback port (plain HTTP, TLS with a self-signed certificate, htpasswd basic auth, a token
server issuing RS256 JWTs), with images
put there by skopeo from an OCI layout this test writes (a static binary and a few files);
rootfs tarball import and the CLI's refusal of what is no tar before the upload; template ls
and inspect."""

import base64
import io
import json
import os
import pathlib
import shutil
import signal
import subprocess
import tarfile
import time
import uuid

import pytest

import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "sdk" / "python"))

import imagebuild  # noqa: E402
import isola  # noqa: E402
import isola_client as ic  # noqa: E402
# tests/conftest.py by path: a bare `import conftest` finds tests/sdk's when CI collects both
from tenancy_util import ROOT_CONFTEST as conftest  # noqa: E402

free_port = conftest.free_port


def wait_port(port, proc, log, scheme="http"):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"docker-registry exited: {pathlib.Path(log).read_text()}"
        cp = subprocess.run(["curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}",
                             f"{scheme}://127.0.0.1:{port}/v2/"], capture_output=True, text=True)
        if cp.stdout in ("200", "401"):
            return
        time.sleep(0.2)
    pytest.fail(f"docker-registry did not listen on {port}: {pathlib.Path(log).read_text()}")


class Registry:
    """One docker-registry process with its own config and storage in a temp dir."""

    def __init__(self, root, tls=False, htpasswd=None, auth=()):
        """auth: config lines of an `auth:` section of the caller's (e.g. token)."""
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.data = root / "data"
        cfg = [
            "version: 0.1", "log:", "  level: warn", "storage:", "  filesystem:",
            f"    rootdirectory: {self.data}", "  delete:", "    enabled: true",
            "http:", f"  addr: 127.0.0.1:{self.port}",
        ]
        self.cert = None
        if tls:
            self.cert = root / "cert.pem"
            key = root / "key.pem"
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                            "-keyout", str(key), "-out", str(self.cert), "-days", "2",
                            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                           check=True, capture_output=True, timeout=60)
            cfg += ["  tls:", f"    certificate: {self.cert}", f"    key: {key}"]
            (root / "certs").mkdir()
            shutil.copy(self.cert, root / "certs" / "ca.crt")  # skopeo --dest-cert-dir
        if htpasswd:
            user, pw = htpasswd
            hp = root / "htpasswd"
            subprocess.run(["htpasswd", "-Bbc", str(hp), user, pw], check=True,
                           capture_output=True)
            cfg += ["auth:", "  htpasswd:", "    realm: isola-test", f"    path: {hp}"]
        if auth:
            cfg += ["auth:"] + list(auth)
        (root / "config.yml").write_text("\n".join(cfg) + "\n")
        self.log = root / "registry.log"
        self.proc = subprocess.Popen(["docker-registry", "serve", str(root / "config.yml")],
                                     stdout=open(self.log, "wb"), stderr=subprocess.STDOUT)
        wait_port(self.port, self.proc, self.log, "https" if tls else "http")

    def push(self, layout, ref, compress=None, creds=None):
        """skopeo copy oci:LAYOUT -> docker://HOST/REF."""
        argv = ["skopeo", "copy", "--quiet", f"oci:{layout}", f"docker://{self.host}/{ref}"]
        argv += ["--dest-cert-dir", str(self.root / "certs")] if self.cert else \
            ["--dest-tls-verify=false"]
        if compress:
            argv += ["--dest-compress-format", compress, "--dest-compress"]
        if creds:
            argv += ["--dest-creds", f"{creds[0]}:{creds[1]}"]
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert cp.returncode == 0, cp.stderr

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def cli(cli):
    """The conftest's cli with stdout and stderr decoded."""
    def run(*args, **kw):
        cp = cli(*args, **kw)
        cp.stdout, cp.stderr = cp.stdout.decode(errors="replace"), cp.stderr.decode(
            errors="replace")
        return cp
    return run


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    """An OCI layout directory: two gzip layers (a static /hello, /etc/new), config Env."""
    d = tmp_path_factory.mktemp("layout")
    hello = imagebuild.build_hello(d)
    tarfile.open(fileobj=io.BytesIO(imagebuild.oci_layout(hello))).extractall(d / "oci")
    return d / "oci"


@pytest.fixture(scope="module")
def registry(tmp_path_factory, layout):
    r = Registry(tmp_path_factory.mktemp("registry"))
    # zstd first: pushed after the gzip one, skopeo would reuse the gzip blobs
    r.push(layout, "tools/hello:zstd", compress="zstd")
    r.push(layout, "tools/hello:1")
    yield r
    r.stop()


def pull(cli, *args, ok=True, timeout=180):
    cp = cli("template", "pull", *args, json=True, timeout=timeout)
    events = [json.loads(line) for line in cp.stdout.splitlines() if line.strip()]
    if ok:
        assert cp.returncode == 0, (cp.stdout, cp.stderr)
        assert events and events[-1]["type"] == "done", events
    return cp, events


def check_runs(api, make_sandbox, name):
    sb = make_sandbox(template=name)
    res = api.exec(sb["id"], cmd=["/hello"])
    assert res["exit_code"] == 0 and res["stdout"] == "hello from template\n", res
    assert api.read_file(sb["id"], "/etc/new") == b"added by layer 2\n"
    assert api.exec(sb["id"], cmd=["hello", "env", "GREETING"])["stdout"] == "from-image\n"
    api.delete_sandbox(sb["id"])


def manifest_digest(registry, ref, accept="application/vnd.oci.image.manifest.v1+json"):
    repo, tag = ref.rsplit(":", 1)
    cp = subprocess.run(["curl", "-sSI", "-H", f"Accept: {accept}",
                         f"http://{registry.host}/v2/{repo}/manifests/{tag}"],
                        capture_output=True, text=True, check=True)
    for line in cp.stdout.splitlines():
        if line.lower().startswith("docker-content-digest:"):
            return line.split(":", 1)[1].strip()
    pytest.fail(f"no digest for {ref}: {cp.stdout}")


def test_pull_plain_http_gzip_runs(cli, api, make_sandbox, registry):
    name = f"pl-{uuid.uuid4().hex[:6]}"
    cp, events = pull(cli, "--plain-http", f"{registry.host}/tools/hello:1", name)
    downloads = {e["phase"]: e for e in events if e["type"] == "progress" and
                 e["phase"].startswith("download sha256:")}
    # config and two layers, each with its final byte count = total
    assert len(downloads) == 3, events
    assert all(e["done"] == e["total"] > 0 for e in downloads.values()), downloads
    t = events[-1]["template"]
    digest = manifest_digest(registry, "tools/hello:1")
    assert t["name"] == name and t["source"] == "pull" and t["layers"] == 2, t
    assert t["origin"] == f"{registry.host}/tools/hello:1@{digest}", t
    check_runs(api, make_sandbox, name)
    # ls: SIZE, LAYERS, SOURCE, CREATED; inspect: JSON with env
    ls = cli("template", "ls")
    assert ls.returncode == 0, ls.stderr
    head = ls.stdout.splitlines()[0].split()
    assert head == ["NAME", "SIZE", "LAYERS", "SOURCE", "CREATED"], ls.stdout
    row = [line for line in ls.stdout.splitlines() if line.startswith(name + " ")]
    assert row and f"pull {registry.host}/tools/hello:1@{digest}" in row[0], ls.stdout
    assert row[0].split()[1] != "-" and " 2 " in row[0], row
    ins = cli("template", "inspect", name)
    assert ins.returncode == 0, ins.stderr
    j = json.loads(ins.stdout)
    assert j["env"]["GREETING"] == "from-image" and j["size_bytes"] > 0, j
    assert cli("template", "rm", name).returncode == 0


@pytest.mark.needs_microvm
def test_pulled_template_runs_in_the_microvm_tier(cli, registry):
    """A pulled image boots in the microvm tier too: its first microvm create builds the
    template's ext4 image from the pulled files, and the guest runs the image's program with
    the image's environment. One boot: TCG is slow."""
    name = f"pv-{uuid.uuid4().hex[:6]}"
    pull(cli, "--plain-http", f"{registry.host}/tools/hello:1", name)
    cp = cli("run", "--tier", "microvm", "--template", name, "--memory", "256M", "--",
             "/hello", timeout=900)  # conftest's MICROVM_CREATE_TIMEOUT: the image is built first
    assert cp.returncode == 0 and cp.stdout == "hello from template\n", (cp.stdout, cp.stderr)
    cp = cli("run", "--tier", "microvm", "--template", name, "--memory", "256M", "--",
             "/hello", "env", "GREETING", timeout=900)
    assert cp.returncode == 0 and cp.stdout == "from-image\n", (cp.stdout, cp.stderr)
    assert cli("template", "rm", name).returncode == 0


def test_pull_zstd_layers(cli, api, make_sandbox, registry):
    name = f"pz-{uuid.uuid4().hex[:6]}"
    # the registry holds zstd layers for this tag (skopeo --dest-compress-format zstd)
    raw = subprocess.run(["curl", "-sS", "-H",
                          "Accept: application/vnd.oci.image.manifest.v1+json",
                          f"http://{registry.host}/v2/tools/hello/manifests/zstd"],
                         capture_output=True, text=True, check=True).stdout
    assert "zstd" in raw, raw
    pull(cli, "--plain-http", f"{registry.host}/tools/hello:zstd", name)
    check_runs(api, make_sandbox, name)
    assert cli("template", "rm", name).returncode == 0


def test_pull_by_digest_and_default_name(cli, api, registry):
    digest = manifest_digest(registry, "tools/hello:1")
    cp, events = pull(cli, "--plain-http", f"{registry.host}/tools/hello@{digest}")
    t = events[-1]["template"]
    assert t["name"] == "hello" and t["origin"] == f"{registry.host}/tools/hello@{digest}", t
    assert cli("template", "rm", "hello").returncode == 0


def test_pull_loopback_without_plain_http_falls_back(api, registry):
    """The API: a loopback registry speaking plain HTTP is used without plain_http (as docker
    treats localhost registries); streamed NDJSON ends with the template."""
    name = f"pa-{uuid.uuid4().hex[:6]}"
    s = api.stream("POST", "/v1/templates/pull",
                   json={"ref": f"{registry.host}/tools/hello:1", "name": name},
                   kind="ndjson", timeout=180)
    with s:
        assert s.status == 200, s.body_if_error()
        events = s.read_all(timeout=180)
    assert events[-1]["type"] == "done", events
    assert api.request("DELETE", f"/v1/templates/{name}").status == 204


def test_pull_through_the_python_sdk(isolad, registry):
    c = isola.Client(socket_path=isolad.socket, timeout=180)
    phases = []
    t = c.pull_template(f"{registry.host}/tools/hello:1", "sdkpull", plain_http=True,
                        on_progress=lambda p: phases.append(p.phase))
    assert t.name == "sdkpull" and t.source == "pull" and t.layers == 2, t
    assert t.origin.startswith(f"{registry.host}/tools/hello:1@sha256:"), t
    assert any(p.startswith("download sha256:") for p in phases), phases
    assert c.get_template("sdkpull").raw["env"]["GREETING"] == "from-image"
    with pytest.raises(isola.errors.NotFoundError):
        c.pull_template(f"{registry.host}/tools/nope:1", "sdknope", plain_http=True)
    c.delete_template("sdkpull")


def test_pull_unknown_image_names_ref(cli, registry):
    cp, events = pull(cli, "--plain-http", f"{registry.host}/tools/nope:1", "nope", ok=False)
    assert cp.returncode != 0
    err = [e for e in events if e["type"] == "error"]
    assert err and err[0]["code"] == "not_found", events
    assert f"{registry.host}/tools/nope:1" in err[0]["message"], err
    assert "nope" not in [t["name"] for t in ic.item_list(
        json.loads(cli("template", "ls", json=True).stdout), "templates")]


def test_pull_no_linux_amd64_in_index(cli, registry, layout, tmp_path):
    """An index whose only entry is linux/arm64 is refused naming the platform."""
    d = tmp_path / "arm"
    shutil.copytree(layout, d)
    idx = json.loads((d / "index.json").read_text())
    man = idx["manifests"][0]
    inner = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
             "manifests": [dict(man, platform={"os": "linux", "architecture": "arm64"})]}
    blob = json.dumps(inner).encode()
    h = imagebuild.sha(blob)
    (d / "blobs" / "sha256" / h).write_bytes(blob)
    idx["manifests"] = [{"mediaType": "application/vnd.oci.image.index.v1+json",
                         "digest": "sha256:" + h, "size": len(blob)}]
    (d / "index.json").write_text(json.dumps(idx))
    cp = subprocess.run(["skopeo", "copy", "--quiet", "--all", f"oci:{d}",
                         f"docker://{registry.host}/tools/arm:1", "--dest-tls-verify=false"],
                        capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    cp, events = pull(cli, "--plain-http", f"{registry.host}/tools/arm:1", "arm", ok=False)
    err = [e for e in events if e["type"] == "error"]
    assert err and "no linux/amd64 manifest" in err[0]["message"], events


def test_pull_corrupted_blob_names_layer(cli, isolad, tmp_path, layout):
    """A layer whose bytes in the registry's storage no longer hash to its digest is refused,
    naming it; nothing is left behind: no template, no import staging dir, no blob under the
    bad digest in the spool (the other blobs stay there for a retry)."""
    reg = Registry(tmp_path / "reg")
    try:
        reg.push(layout, "tools/bad:1")
        blobs = list((reg.data / "docker/registry/v2/blobs/sha256").glob("*/*/data"))
        layers = [b for b in blobs if b.stat().st_size > 10000]  # the layer with /hello
        assert len(layers) == 1, blobs
        victim = layers[0]
        data = bytearray(victim.read_bytes())
        data[len(data) // 2] ^= 0xFF
        victim.write_bytes(bytes(data))
        digest = victim.parent.name
        cp, events = pull(cli, "--plain-http", f"{reg.host}/tools/bad:1", "bad", ok=False)
        err = [e for e in events if e["type"] == "error"]
        assert err and err[0]["code"] == "invalid", events
        assert f"layer sha256:{digest[:12]}" in err[0]["message"], err
        assert "digest mismatch" in err[0]["message"], err
        assert cli("template", "inspect", "bad").returncode != 0
        tdir = pathlib.Path(isolad.state_dir) / "templates"
        assert not list(tdir.glob(".tmp-*")), list(tdir.iterdir())
        assert not list(tdir.glob(f".pull-*/blobs/sha256/{digest}*")), \
            list(tdir.glob(".pull-*/blobs/sha256/*"))
    finally:
        reg.stop()


def test_pull_tls_ca_file(cli, api, make_sandbox, tmp_path, layout):
    reg = Registry(tmp_path / "tls", tls=True)
    try:
        reg.push(layout, "tools/hello:1")
        ref = f"{reg.host}/tools/hello:1"
        cp, events = pull(cli, ref, "tlsbad", ok=False)
        err = [e for e in events if e["type"] == "error"]
        assert err and "--ca-file" in err[0]["message"], (events, cp.stderr)
        pull(cli, "--ca-file", str(reg.cert), ref, "tlsok")
        check_runs(api, make_sandbox, "tlsok")
        assert cli("template", "rm", "tlsok").returncode == 0
    finally:
        reg.stop()


def test_pull_basic_auth_and_docker_config(cli, tmp_path, layout):
    reg = Registry(tmp_path / "auth", htpasswd=("alice", "s3cret"))
    try:
        reg.push(layout, "tools/hello:1", creds=("alice", "s3cret"))
        ref = f"{reg.host}/tools/hello:1"
        cp, events = pull(cli, "--plain-http", ref, "authnone", ok=False)
        err = [e for e in events if e["type"] == "error"]
        assert err and "username" in err[0]["message"], events
        cp = cli("template", "pull", "--plain-http", "--username", "alice",
                 "--password-stdin", ref, "authwrong", input="nope\n", json=True)
        assert cp.returncode != 0 and "refused" in cp.stdout, cp.stdout
        cp = cli("template", "pull", "--plain-http", "--username", "alice",
                 "--password-stdin", ref, "authok", input="s3cret\n", json=True)
        assert cp.returncode == 0, cp.stdout
        # docker's config.json auths, when no credentials are given
        cfgdir = tmp_path / "docker"
        cfgdir.mkdir()
        (cfgdir / "config.json").write_text(json.dumps({"auths": {reg.host: {
            "auth": base64.b64encode(b"alice:s3cret").decode()}}}))
        cp = cli("template", "pull", "--plain-http", ref, "authcfg", json=True,
                 env={"DOCKER_CONFIG": str(cfgdir)})
        assert cp.returncode == 0, cp.stdout
        for n in ("authok", "authcfg"):
            assert cli("template", "rm", n).returncode == 0
    finally:
        reg.stop()


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


class TokenServer:
    """A registry token server (the distribution token spec, the handshake docker and skopeo
    speak): GET /token?service=&scope= with HTTP Basic credentials answers a JWT signed RS256
    with a self-signed certificate the registry trusts (x5c header). Logs every request."""

    SERVICE = "isola-test-registry"
    ISSUER = "isola-test-issuer"

    def __init__(self, root, users):
        import http.server
        import threading
        self.users = users
        self.requests = []  # (scope list, user or None, status)
        self.key, self.cert = root / "token-key.pem", root / "token-cert.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                        "-keyout", str(self.key), "-out", str(self.cert), "-days", "2",
                        "-subj", "/CN=isola-test-token"],
                       check=True, capture_output=True, timeout=60)
        der = subprocess.run(["openssl", "x509", "-in", str(self.cert), "-outform", "DER"],
                             check=True, capture_output=True).stdout
        self.x5c = base64.b64encode(der).decode()
        srv = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                import urllib.parse
                u = urllib.parse.urlparse(self.path)
                q = urllib.parse.parse_qs(u.query)
                user = None
                h = self.headers.get("Authorization", "")
                if h.startswith("Basic "):
                    name, _, pw = base64.b64decode(h[6:]).decode().partition(":")
                    if srv.users.get(name) != pw:
                        srv.requests.append((q.get("scope", []), name, 401))
                        self.send_response(401)
                        self.end_headers()
                        return
                    user = name
                scopes = q.get("scope", [])
                access = []
                for sc in scopes:
                    kind, name, actions = sc.split(":")
                    # anonymous callers get nothing; known users what they ask
                    access.append({"type": kind, "name": name,
                                   "actions": actions.split(",") if user else []})
                tok = srv.sign({"iss": srv.ISSUER, "sub": user or "", "aud": q["service"][0],
                                "exp": int(time.time()) + 300, "nbf": int(time.time()) - 10,
                                "iat": int(time.time()), "jti": uuid.uuid4().hex,
                                "access": access})
                srv.requests.append((scopes, user, 200))
                body = json.dumps({"token": tok, "expires_in": 300}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def sign(self, claims):
        head = b64url(json.dumps({"typ": "JWT", "alg": "RS256", "x5c": [self.x5c]}).encode())
        body = b64url(json.dumps(claims).encode())
        sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(self.key)],
                             input=f"{head}.{body}".encode(), check=True,
                             capture_output=True).stdout
        return f"{head}.{body}.{b64url(sig)}"

    def registry_auth(self):
        return ["  token:", f"    realm: http://127.0.0.1:{self.port}/token",
                f"    service: {self.SERVICE}", f"    issuer: {self.ISSUER}",
                f"    rootcertbundle: {self.cert}"]

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_pull_token_auth_handshake(cli, api, make_sandbox, tmp_path, layout):
    """A registry behind a token server: the pull answers the Bearer challenge by asking the
    realm for a pull token on this repository alone (credentials by Basic auth), and uses it."""
    ts = TokenServer(tmp_path, {"bob": "t0ken-pw"})
    reg = Registry(tmp_path / "tok", auth=ts.registry_auth())
    try:
        reg.push(layout, "tools/hello:1", creds=("bob", "t0ken-pw"))
        ref = f"{reg.host}/tools/hello:1"
        assert any(u == "bob" and st == 200 for _, u, st in ts.requests), ts.requests
        ts.requests.clear()
        # no credentials: the anonymous token grants nothing, the registry refuses
        cp, events = pull(cli, "--plain-http", ref, "toknone", ok=False)
        assert cp.returncode != 0, events
        assert [sc for sc, u, _ in ts.requests if u is None], ts.requests
        ts.requests.clear()
        cp = cli("template", "pull", "--plain-http", "--username", "bob",
                 "--password-stdin", ref, "tokwrong", input="nope\n", json=True)
        assert cp.returncode != 0 and "refused the credentials" in cp.stdout, cp.stdout
        ts.requests.clear()
        cp = cli("template", "pull", "--plain-http", "--username", "bob",
                 "--password-stdin", ref, "tokok", input="t0ken-pw\n", json=True)
        assert cp.returncode == 0, (cp.stdout, cp.stderr)
        # only ever a pull scope on this repository, with the user's credentials
        assert ts.requests and all(sc == ["repository:tools/hello:pull"] and u == "bob"
                                   for sc, u, _ in ts.requests), ts.requests
        check_runs(api, make_sandbox, "tokok")
        assert cli("template", "rm", "tokok").returncode == 0
        names = [t["name"] for t in api.get_json("/v1/templates")["templates"]]
        assert "toknone" not in names and "tokwrong" not in names, names
    finally:
        reg.stop()
        ts.stop()


def test_build_from_an_image_reference_pulls_it_once(cli, api, make_sandbox, registry, isolad,
                                                   tmp_path):
    """FROM <registry>/repo:tag in the operator's `template build` pulls the image (progress
    and a `pull` event in the stream) as template images_ref_template_name(ref), builds on it,
    and a second build FROM the same reference uses that template without pulling; a
    tenant's build is refused (pull is the operator's) naming the reference."""
    from tenancy_util import Tenant
    ref = f"{registry.host}/tools/hello:1"
    pulled = ref.replace(":", "-").replace("/", "-")
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "note.txt").write_text("built on a pulled image\n")
    (ctx / "Dockerfile").write_text(f'FROM {ref}\nCOPY note.txt /note.txt\nRUN ["/hello"]\n')

    def build(name):
        cp = cli("template", "build", name, str(ctx), json=True, timeout=300)
        ev = [json.loads(line) for line in cp.stdout.splitlines() if line.strip()]
        assert cp.returncode == 0 and ev and ev[-1]["type"] == "done", (cp.stdout, cp.stderr)
        return ev

    a, b = (f"fp-{uuid.uuid4().hex[:6]}" for _ in "ab")
    ev = build(a)
    pulls = [e for e in ev if e["type"] == "pull"]
    assert pulls == [{"type": "pull", "ref": ref, "template": pulled}], pulls
    assert any(e["type"] == "progress" and e["phase"].startswith("pull ") for e in ev), ev
    assert any(e["type"] == "output" and e["line"] == "hello from template" for e in ev), ev
    assert pulled in {t["name"] for t in api.request("GET", "/v1/templates").json()["templates"]}
    sb = make_sandbox(template=a)
    assert api.read_file(sb["id"], "/note.txt") == b"built on a pulled image\n"
    assert api.read_file(sb["id"], "/etc/new") == b"added by layer 2\n"
    api.delete_sandbox(sb["id"])
    ev = build(b)
    assert not [e for e in ev if e["type"] == "pull"], "the second build pulled again"

    t = Tenant(isolad)
    try:
        (ctx / "Dockerfile").write_text(f"FROM {registry.host}/tools/hello:zstd\nRUN [\"/hello\"]\n")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tf:
            tf.add(ctx / "Dockerfile", arcname="Dockerfile")
        r = t.client.request("POST", "/v1/templates/build",
                             query={"name": f"fp-t-{uuid.uuid4().hex[:6]}", "options": "{}"},
                             body=buf.getvalue(), timeout=120)
        ev = [json.loads(line) for line in r.body.decode().splitlines() if line.strip()]
        assert ev and ev[-1]["type"] == "error" and ev[-1]["code"] == "forbidden", ev
        assert "hello:zstd" in ev[-1]["message"] and "operator" in ev[-1]["message"], ev
        assert not [e for e in ev if e["type"] == "pull"], ev
    finally:
        t.cleanup()


def test_import_rootfs_tarball(cli, api, make_sandbox, layout, tmp_path):
    """A plain root filesystem tarball (like `docker import`), zstd-compressed."""
    hello = (layout.parent / "hello").read_bytes()
    D, F = tarfile.DIRTYPE, tarfile.REGTYPE
    raw = imagebuild.tar_bytes([("bin", None, 0o755, D), ("etc", None, 0o755, D),
                                ("hello", hello, 0o755, F), ("root", None, 0o700, D),
                                ("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n", 0o644, F),
                                ("etc/group", b"root:x:0:\n", 0o644, F),
                                ("etc/new", b"added by layer 2\n", 0o644, F)])
    plain = tmp_path / "rootfs.tar"
    plain.write_bytes(raw)
    subprocess.run(["zstd", "-q", "-f", str(plain), "-o", str(tmp_path / "rootfs.tar.zst")],
                   check=True)
    name = f"rf-{uuid.uuid4().hex[:6]}"
    cp = cli("template", "import", name, tmp_path / "rootfs.tar.zst", timeout=120)
    assert cp.returncode == 0, cp.stderr
    t = json.loads(cli("template", "inspect", name).stdout)
    assert t["source"] == "rootfs" and t["layers"] == 1, t
    sb = make_sandbox(template=name)
    assert api.exec(sb["id"], cmd=["/hello"])["stdout"] == "hello from template\n"
    assert api.read_file(sb["id"], "/etc/new") == b"added by layer 2\n"


def test_import_oci_layout_directory(cli, layout):
    name = f"od-{uuid.uuid4().hex[:6]}"
    cp = cli("template", "import", name, layout, timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert json.loads(cli("template", "inspect", name).stdout)["source"] == "oci"
    assert cli("template", "rm", name).returncode == 0


def test_import_refuses_non_tar_before_upload(cli, isolad, tmp_path):
    png = tmp_path / "shot.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(4096))
    before = isolad.log_text().count("POST /v1/templates")
    cp = cli("template", "import", "pic", png)
    assert cp.returncode != 0
    assert f"`{png}` is a PNG image, not a tar archive or OCI layout" in cp.stderr, cp.stderr
    # refused by the CLI: no upload reached isolad
    assert isolad.log_text().count("POST /v1/templates") == before
    d = tmp_path / "notalayout"
    d.mkdir()
    cp = cli("template", "import", "dir", d)
    assert cp.returncode != 0 and "not an OCI layout" in cp.stderr, cp.stderr


def test_pull_throughput_vs_skopeo(cli, isolad, registry, tmp_path, capsys):
    """Reports pull throughput next to `skopeo copy` of the same image from the same
    registry (a figure for the report, no timed assertion)."""
    # a 64 MiB incompressible layer makes the transfer dominate
    D, F = tarfile.DIRTYPE, tarfile.REGTYPE
    layer = imagebuild.tar_bytes([("data", None, 0o755, D),
                                  ("data/blob", os.urandom(64 << 20), 0o644, F)])
    lay = tmp_path / "lay"
    (lay / "blobs" / "sha256").mkdir(parents=True)
    cfg = imagebuild.image_config([layer])
    cfg = cfg.encode() if isinstance(cfg, str) else cfg
    for b in (layer, cfg):
        (lay / "blobs" / "sha256" / imagebuild.sha(b)).write_bytes(b)
    man = json.dumps({"schemaVersion": 2,
                      "mediaType": "application/vnd.oci.image.manifest.v1+json",
                      "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                 "digest": "sha256:" + imagebuild.sha(cfg), "size": len(cfg)},
                      "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                                  "digest": "sha256:" + imagebuild.sha(layer),
                                  "size": len(layer)}]}).encode()
    (lay / "blobs" / "sha256" / imagebuild.sha(man)).write_bytes(man)
    (lay / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    (lay / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json",
         "digest": "sha256:" + imagebuild.sha(man), "size": len(man)}]}))
    registry.push(lay, "tools/big:1")
    t0 = time.monotonic()
    cp = subprocess.run(["skopeo", "copy", "--quiet", "--src-tls-verify=false",
                         f"docker://{registry.host}/tools/big:1", f"oci:{tmp_path}/out:x"],
                        capture_output=True, text=True, timeout=300)
    skopeo_s = time.monotonic() - t0
    assert cp.returncode == 0, cp.stderr
    # the CLI's NDJSON lines timed as they arrive: the download alone, and the whole pull
    argv = [str(conftest.CLI), "--socket", isolad.socket, "--json", "template", "pull",
            "--plain-http", f"{registry.host}/tools/big:1", "big"]
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    dl_s = None
    for line in proc.stdout:
        ev = json.loads(line)
        if ev.get("phase", "").startswith("download") and ev["done"] == ev["total"] and \
                ev["total"] > (1 << 20):
            dl_s = time.monotonic() - t0
    assert proc.wait(timeout=300) == 0
    pull_s = time.monotonic() - t0
    assert dl_s, "no completed download event for the big layer"
    mib = len(layer) / (1 << 20)
    with capsys.disabled():
        print(f"\npull throughput ({mib:.0f} MiB layer): isola download {mib / dl_s:.1f} MiB/s "
              f"({dl_s:.2f} s), whole pull with import {mib / pull_s:.1f} MiB/s "
              f"({pull_s:.2f} s); skopeo copy {mib / skopeo_s:.1f} MiB/s ({skopeo_s:.2f} s); "
              f"download/skopeo {skopeo_s / dl_s:.2f}x, pull/skopeo {skopeo_s / pull_s:.2f}x")
    assert cli("template", "rm", "big").returncode == 0


def test_pull_resumes_partial_layer(cli, api, make_sandbox, isolad, registry):
    """A partial blob kept by an earlier attempt is continued with a Range request: a good
    first half completes; a garbled first half (kept, not re-downloaded) fails the digest and
    is discarded, so the next attempt succeeds. A whole blob kept under its digest is used when
    its bytes match, downloaded again when they do not."""
    import hashlib
    ref_text = f"{registry.host}/tools/hello:1"
    man = json.loads(subprocess.run(
        ["curl", "-sS", "-H", "Accept: application/vnd.oci.image.manifest.v1+json",
         f"http://{registry.host}/v2/tools/hello/manifests/1"],
        capture_output=True, text=True, check=True).stdout)
    layer = max(man["layers"], key=lambda d: d["size"])
    blob = subprocess.run(["curl", "-sSL", f"http://{registry.host}/v2/tools/hello/blobs/"
                           f"{layer['digest']}"], capture_output=True, check=True).stdout
    assert len(blob) == layer["size"]
    hexd = layer["digest"].split(":")[1]

    def partial(name, data):
        key = hashlib.sha256(name.encode() + b"\0" + ref_text.encode()).hexdigest()[:16]
        d = pathlib.Path(isolad.state_dir) / "templates" / f".pull-{key}" / "blobs" / "sha256"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{hexd}.partial").write_bytes(data)
        return d

    half = len(blob) // 2
    d = partial("resumed", blob[:half])
    cp, events = pull(cli, "--plain-http", ref_text, "resumed")
    assert not d.parent.parent.exists(), "the spool is removed after a successful pull"
    assert cli("template", "rm", "resumed").returncode == 0

    garbled = bytes(b ^ 0xFF for b in blob[:half])
    d = partial("garbled", garbled)
    cp, events = pull(cli, "--plain-http", ref_text, "garbled", ok=False)
    err = [e for e in events if e["type"] == "error"]
    assert err and f"layer sha256:{hexd[:12]}" in err[0]["message"] and \
        "digest mismatch" in err[0]["message"], events
    assert not (d / f"{hexd}.partial").exists(), "a blob that failed its digest is discarded"
    pull(cli, "--plain-http", ref_text, "garbled")
    assert cli("template", "rm", "garbled").returncode == 0

    # A whole blob kept under its digest is hashed again before the import takes its name
    # for its digest: one of the right size whose bytes differ is discarded and downloaded.
    d = partial("kept", b"")
    (d / f"{hexd}.partial").unlink()
    (d / hexd).write_bytes(bytes(b ^ 0xFF for b in blob))
    pull(cli, "--plain-http", ref_text, "kept")
    assert not d.parent.parent.exists(), "the spool is removed after a successful pull"
    check_runs(api, make_sandbox, "kept")
    assert cli("template", "rm", "kept").returncode == 0
    d = partial("kept2", b"")
    (d / f"{hexd}.partial").unlink()
    (d / hexd).write_bytes(blob)
    pull(cli, "--plain-http", ref_text, "kept2")
    assert cli("template", "rm", "kept2").returncode == 0
