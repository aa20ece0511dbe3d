# SPDX-License-Identifier: Apache-2.0
"""`isola template build` (POST /v1/templates/build): a Python image with a wheel made here and
pip-installed by RUN, a Node image with a local npm pack tarball, ENV/WORKDIR/USER/CMD recorded,
the layer cache on rebuild, a failing RUN leaving no template, refusals before any sandbox,
.dockerignore, and default-deny egress for RUN steps."""

import base64
import hashlib
import http.server
import json
import pathlib
import shutil
import subprocess
import threading
import time
import uuid
import zipfile

import pytest


@pytest.fixture
def cli(cli):
    """The conftest's cli with stdout and stderr decoded."""
    def run(*args, **kw):
        cp = cli(*args, **kw)
        cp.stdout, cp.stderr = cp.stdout.decode(errors="replace"), cp.stderr.decode(
            errors="replace")
        return cp
    return run


def build(cli, name, ctx, *args, ok=True, timeout=600):
    t0 = time.monotonic()
    cp = cli("template", "build", *args, name, ctx, json=True, timeout=timeout)
    events = [json.loads(line) for line in cp.stdout.splitlines() if line.strip()]
    if ok:
        assert cp.returncode == 0, (cp.stdout[-3000:], cp.stderr)
        assert events and events[-1]["type"] == "done", events
    return cp, events, time.monotonic() - t0


def sandboxes(api):
    return api.list_sandboxes()


def make_wheel(d, name="isolahello", version="1.0"):
    """A pure-Python wheel written with zipfile: module, METADATA, WHEEL, RECORD."""
    files = {
        f"{name}/__init__.py": "def greet():\n    return 'hello from the wheel'\n",
        f"{name}-{version}.dist-info/METADATA":
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{name}-{version}.dist-info/WHEEL":
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    rec = []
    for p, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        rec.append(f"{p},sha256={digest.decode()},{len(text.encode())}")
    rec.append(f"{name}-{version}.dist-info/RECORD,,")
    files[f"{name}-{version}.dist-info/RECORD"] = "\n".join(rec) + "\n"
    whl = d / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        for p, text in files.items():
            z.writestr(p, text)
    return whl


def test_python_image_with_wheel_env_workdir_user_cmd_and_cache(cli, api, make_sandbox,
                                                                 tmp_path, capsys):
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    whl = make_wheel(ctx)
    (ctx / "secret.txt").write_text("must not be sent\n")
    (ctx / "notes").mkdir()
    (ctx / "notes" / "keep.md").write_text("kept\n")
    (ctx / "notes" / "drop.log").write_text("dropped\n")
    (ctx / ".dockerignore").write_text("secret.txt\n**/*.log\n")
    # Debian's python3 in the host template marks its site-packages externally managed and
    # /usr is the host's, read-only: pip installs into /opt/py, put on PYTHONPATH by ENV.
    (ctx / "Dockerfile").write_text(
        "# syntax=docker/dockerfile:1\n"
        "ARG GREETING=default\n"
        "FROM host\n"
        "ENV PYTHONPATH=/opt/py APP_GREETING=${GREETING}\n"
        f"COPY {whl.name} /tmp/\n"
        "RUN python3 -m pip install --no-index --no-deps --target /opt/py \\\n"
        f"      /tmp/{whl.name} && \\\n"
        "    echo installed\n"
        "COPY . /ctx/\n"
        "WORKDIR /srv/app\n"
        "RUN <<EOF\n"
        "echo one > heredoc.txt\n"
        "echo two >> heredoc.txt\n"
        "EOF\n"
        "USER user\n"
        "LABEL org.example.k=v\n"
        "EXPOSE 8080\n"
        'CMD ["python3", "-c", "import isolahello; print(isolahello.greet())"]\n')
    name = f"py-{uuid.uuid4().hex[:6]}"
    cp, ev, cold = build(cli, name, ctx, "--build-arg", "GREETING=hi")
    assert any(e["type"] == "output" and e["line"] == "installed" for e in ev), ev
    layers = [e for e in ev if e["type"] == "layer"]
    assert layers and not any(e["cached"] for e in layers), layers
    t = ev[-1]["template"]
    assert t["source"] == "build" and t["origin"].startswith("sha256:"), t

    info = json.loads(cli("template", "inspect", name, json=True).stdout)
    assert info["config"]["cmd"] == ["python3", "-c",
                                     "import isolahello; print(isolahello.greet())"], info
    assert info["config"]["labels"] == {"org.example.k": "v"}
    assert info["config"]["exposed_ports"] == ["8080"]
    assert info["env"]["APP_GREETING"] == "hi" and info["env"]["PYTHONPATH"] == "/opt/py"
    assert info["default_user"] == "user" and info["workdir"] == "/srv/app", info
    ls = cli("template", "ls")
    assert name in ls.stdout and "build" in ls.stdout, ls.stdout

    sb = make_sandbox(template=name)
    res = api.exec(sb["id"], cmd=info["config"]["cmd"])
    assert res["exit_code"] == 0 and res["stdout"] == "hello from the wheel\n", res
    res = api.exec(sb["id"], cmd=["sh", "-c", "id -un; pwd; cat heredoc.txt; echo $APP_GREETING"])
    assert res["stdout"] == "user\n/srv/app\none\ntwo\nhi\n", res
    res = api.exec(sb["id"], cmd=["sh", "-c", "ls /ctx /ctx/notes"])
    assert "secret.txt" not in res["stdout"] and "drop.log" not in res["stdout"], res
    assert "keep.md" in res["stdout"], res

    # The same Dockerfile and context again: every layer from the cache.
    name2 = name + "-b"
    cp, ev2, warm = build(cli, name2, ctx, "--build-arg", "GREETING=hi")
    layers2 = [e for e in ev2 if e["type"] == "layer"]
    assert layers2 and all(e["cached"] for e in layers2), layers2
    assert not any(e["type"] == "output" for e in ev2), "a cached RUN ran again"
    with capsys.disabled():
        print(f"\ntemplate build: cold {cold:.1f}s, cached rebuild {warm:.1f}s")
    # A changed build arg changes what the RUN steps run with: a miss from there.
    cp, ev3, _ = build(cli, name + "-c", ctx, "--build-arg", "GREETING=other")
    assert not all(e["cached"] for e in ev3 if e["type"] == "layer"), ev3


def test_node_image_with_local_npm_tarball(cli, api, make_sandbox, tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "package.json").write_text(json.dumps({"name": "isola-left", "version": "1.0.0",
                                                  "main": "index.js"}))
    (pkg / "index.js").write_text("module.exports = () => 'left from npm';\n")
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    subprocess.run(["npm", "pack", "--pack-destination", str(ctx), str(pkg)], check=True,
                   capture_output=True, timeout=120)
    tgz = next(ctx.glob("*.tgz")).name
    df = tmp_path / "node.Dockerfile"  # -f outside the context
    df.write_text("FROM host\nWORKDIR /app\n"
                  f"COPY {tgz} ./\n"
                  f"RUN npm install --offline --no-audit --no-fund ./{tgz} >/dev/null "
                  f"&& ls node_modules && rm ./{tgz}\n"
                  'ENTRYPOINT ["node", "-e"]\n')
    name = f"node-{uuid.uuid4().hex[:6]}"
    cp, ev, _ = build(cli, name, ctx, "-f", df)
    assert any(e["type"] == "output" and e["line"] == "isola-left" for e in ev), ev
    sb = make_sandbox(template=name)
    res = api.exec(sb["id"], cmd=["node", "-e", "console.log(require('isola-left')())"])
    assert res["exit_code"] == 0 and res["stdout"] == "left from npm\n", res
    # deleted by the RUN step from a lower (COPY) layer: an overlay whiteout, applied
    res = api.exec(sb["id"], cmd=["sh", "-c", f"cd /app && ls; test ! -e {tgz}"])
    assert res["exit_code"] == 0, res


def test_failing_run_leaves_no_template(cli, api, isolad, tmp_path):
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM host\nRUN echo about to fail && exit 7\n")
    name = f"bad-{uuid.uuid4().hex[:6]}"
    cp, ev, _ = build(cli, name, ctx, ok=False)
    assert cp.returncode != 0
    assert ev[-1]["type"] == "error", ev
    msg = ev[-1]["message"]
    assert "exit code 7" in msg and "about to fail" in msg and "step 1/1" in msg, msg
    assert cli("template", "inspect", name).returncode != 0
    assert name not in cli("template", "ls").stdout
    assert not list((pathlib.Path(isolad.state_dir) / "templates").glob(".tmp-*"))
    assert not [s for s in sandboxes(api) if s.get("labels", {}).get("isola.build")]
    # human mode: a non-zero exit and the reason on stderr
    cp = cli("template", "build", name, ctx)
    assert cp.returncode != 0 and "exit code 7" in cp.stderr, cp.stderr


def test_cpu_and_memory_recorded_as_its_sandboxes_defaults(cli, api, make_sandbox, tmp_path):
    """--cpu/--memory are the template's config.resources: a create that names no limit
    gets them, one that names a limit keeps its own; bad values are refused by name."""
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM host\nENV SIZED=1\n")
    name = f"sized-{uuid.uuid4().hex[:6]}"
    build(cli, name, ctx, "--cpu", "1.5", "--memory", "300M")
    t = json.loads(cli("template", "inspect", name).stdout)
    assert t["config"]["resources"] == {"cpu": 1.5, "memory": 300 << 20}, t
    sb = make_sandbox(template=name)
    assert (sb["cpu"], sb["memory"]) == (1.5, 300 << 20), sb
    sb = make_sandbox(template=name, memory="64M")
    assert (sb["cpu"], sb["memory"]) == (1.5, 64 << 20), sb
    # a template built without them leaves the daemon's defaults
    plain = f"plain-{uuid.uuid4().hex[:6]}"
    build(cli, plain, ctx)
    assert "resources" not in json.loads(cli("template", "inspect", plain).stdout)["config"]
    assert make_sandbox(template=plain)["memory"] == make_sandbox()["memory"]
    for args, word in ((("--memory", "1M"), "memory must be at least 16M"),
                       (("--cpu", "0"), "--cpu `0`"), (("--memory", "lots"), "--memory `lots`")):
        cp = cli("template", "build", *args, f"bad-{uuid.uuid4().hex[:6]}", ctx)
        assert cp.returncode != 0 and word in cp.stderr, (args, cp.stderr)
    for n in (name, plain):
        cli("template", "rm", n)


def test_removed_tenants_cache_and_uploads_go_with_it(api, isolad, tmp_path):
    """A tenant's build cache entries and E2B uploads are removed with the tenant: a tenant
    created later under the same name is someone else and gets none of them (no cache hit on
    the old one's RUN layers, no `present` upload)."""
    import io
    import tarfile
    from tenancy_util import Tenant

    tag = uuid.uuid4().hex[:8]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        df = f"FROM host\nRUN echo secret-{tag} > /opt/s.txt\n".encode()
        ti = tarfile.TarInfo("Dockerfile")
        ti.size = len(df)
        tf.addfile(ti, io.BytesIO(df))

    built = []

    def tenant_build(t):
        built.append(f"tb-{uuid.uuid4().hex[:6]}")
        r = t.client.request("POST", "/v1/templates/build",
                             query={"name": built[-1], "options": "{}"},
                             body=buf.getvalue(), timeout=300)
        ev = [json.loads(line) for line in r.body.decode().splitlines() if line.strip()]
        assert ev and ev[-1]["type"] == "done", ev
        return [e["cached"] for e in ev if e["type"] == "layer"]

    def entries(name):
        r = api.request("GET", "/v1/templates/build/cache")
        return [e for e in r.json()["entries"] if e.get("tenant") == name]

    t = Tenant(isolad)
    store = None
    try:
        assert tenant_build(t) == [False]
        assert entries(t.name), "the tenant's RUN left no cache entry"
        # An E2B upload in the tenant's file store (as the SDK's copy() leaves one).
        spool = pathlib.Path(isolad.state_dir) / "tmp" / "e2b-files"
        store = spool / hashlib.sha256(t.name.encode()).hexdigest()[:32]
        store.mkdir(parents=True, exist_ok=True)
        (store / ("ab" * 32)).write_bytes(b"uploaded by the old tenant")
    finally:
        t.cleanup()
    assert not entries(t.name), entries(t.name)
    assert store is not None and not store.exists(), list(store.iterdir())
    # The same name again: a new tenant, a cold build.
    r = api.request("POST", "/v1/tenants", json={"name": t.name})
    assert r.status == 201, r
    t2 = Tenant.__new__(Tenant)
    t2.isolad, t2.admin, t2.name, t2.tokens = isolad, isolad.client(timeout=60), t.name, []
    t2.token = t2.new_token()
    t2.client = isolad.tcp_client(token=t2.token, timeout=60)
    try:
        assert tenant_build(t2) == [False]
    finally:
        t2.cleanup()
        for n in built:  # the removed tenants' templates are the operator's now
            api.request("DELETE", f"/v1/templates/{n}")


@pytest.mark.parametrize("line,word", [
    ("HEALTHCHECK CMD true", "HEALTHCHECK"), ("ONBUILD RUN true", "ONBUILD"),
    ("STOPSIGNAL SIGTERM", "STOPSIGNAL"), ("SHELL [\"/bin/bash\", \"-c\"]", "SHELL"),
    ("VOLUME /data", "VOLUME"), ("FROM host", "multi-stage"),
    ("ADD https://example.invalid/x.tar /x", "ADD of a URL")])
def test_unsupported_refused_before_any_sandbox(cli, api, tmp_path, line, word):
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(f"FROM host\nRUN touch /should-not-run\n{line}\n")
    before = len(sandboxes(api))
    cp, ev, _ = build(cli, f"ref-{uuid.uuid4().hex[:6]}", ctx, ok=False)
    assert cp.returncode != 0 and ev[-1]["type"] == "error", ev
    assert word in ev[-1]["message"] and "line 3" in ev[-1]["message"], ev[-1]
    assert not [e for e in ev if e["type"] == "step"], "work started before the refusal"
    assert len(sandboxes(api)) == before


def test_from_image_ref_that_cannot_be_pulled_names_it(cli, api, tmp_path):
    """FROM of an image reference is pulled by the operator's build (test_template_pull.py);
    a registry that does not answer (loopback port 9: nothing listens) fails the build
    naming the line, the reference and the pull, and leaves no template of either name."""
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    ref = "127.0.0.1:9/none/x:1"
    (ctx / "Dockerfile").write_text(f"FROM {ref}\nRUN true\n")
    name = f"ref-{uuid.uuid4().hex[:6]}"
    cp, ev, _ = build(cli, name, ctx, ok=False)
    assert cp.returncode != 0 and ev[-1]["type"] == "error", ev
    msg = ev[-1]["message"]
    assert "line 1" in msg and ref in msg and "pull" in msg, msg
    assert [e for e in ev if e["type"] == "pull"], "no pull was announced"
    names = {t["name"] for t in api.request("GET", "/v1/templates").json()["templates"]}
    assert name not in names and "127.0.0.1-9-none-x-1" not in names, names


class _Hits(http.server.BaseHTTPRequestHandler):
    hits = []

    def do_GET(self):
        _Hits.hits.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"reached\n")

    def log_message(self, *a):
        pass


def test_run_default_deny_cannot_reach_the_host(cli, tmp_path):
    srv = http.server.ThreadingHTTPServer(("0.0.0.0", 0), _Hits)
    port = srv.server_address[1]
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        ctx = tmp_path / "ctx"
        ctx.mkdir()
        # The sandbox's default gateway is the host end of its veth; 127.0.0.1 inside is
        # the sandbox's own loopback.
        (ctx / "Dockerfile").write_text(
            "FROM host\n"
            "RUN python3 - <<'PY'\n"
            "import socket, struct, urllib.request\n"
            "gw = None\n"
            "for l in open('/proc/net/route').read().splitlines()[1:]:\n"
            "    f = l.split()\n"
            "    if f[1] == '00000000':\n"
            "        gw = socket.inet_ntoa(struct.pack('<L', int(f[2], 16)))\n"
            f"for host in [h for h in (gw, '127.0.0.1') if h]:\n"
            "    try:\n"
            f"        urllib.request.urlopen(f'http://{{host}}:{port}/', timeout=3)\n"
            "        print('REACHED', host)\n"
            "    except Exception as e:\n"
            "        print('BLOCKED', host, type(e).__name__)\n"
            "PY\n")
        cp, ev, _ = build(cli, f"net-{uuid.uuid4().hex[:6]}", ctx)
        lines = [e["line"] for e in ev if e["type"] == "output"]
        assert lines and all(x.startswith("BLOCKED") for x in lines), lines
        assert _Hits.hits == [], _Hits.hits
    finally:
        srv.shutdown()


def _tar(path, members, mode="w"):
    """A tar at path of (name, text) files and (name, None, link) symlinks."""
    import io
    import tarfile
    with tarfile.open(path, mode) as t:
        for m in members:
            ti = tarfile.TarInfo(m[0])
            if len(m) == 3:
                ti.type, ti.linkname = tarfile.SYMTYPE, m[2]
                t.addfile(ti)
            else:
                data = m[1].encode()
                ti.size, ti.mode = len(data), 0o644
                t.addfile(ti, io.BytesIO(data))


def test_add_extracts_local_archives_by_content(cli, api, make_sandbox, tmp_path):
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "hello.txt").write_text("hello from the archive\n")
    for arg, name in (("-cf", "x.tar"), ("-cJf", "x.tar.xz"), ("-cjf", "x.tar.bz2"),
                      ("--zstd -cf", "x.tar.zst")):
        subprocess.run(["tar", *arg.split(), str(ctx / name), "-C", str(src), "pkg"],
                       check=True)
    # Told apart by content, not by name: a gzipped tar called data.bin is unpacked, a text
    # file called notes.tar.gz and a gzipped text file are copied as they are.
    subprocess.run(["tar", "-czf", str(ctx / "data.bin"), "-C", str(src), "pkg"], check=True)
    (ctx / "notes.tar.gz").write_text("not an archive\n")
    (ctx / "readme.txt").write_text("gzip, but no tar inside\n")
    subprocess.run(["gzip", "-k", str(ctx / "readme.txt")], check=True)
    (ctx / "Dockerfile").write_text(
        "FROM host\n"
        "ADD data.bin /opt/gz/\n"
        "ADD x.tar /opt/tar\n"
        "ADD x.tar.xz /opt/xz/\n"
        "ADD x.tar.bz2 /opt/bz2/\n"
        "ADD x.tar.zst /opt/zst/\n"
        "ADD notes.tar.gz readme.txt.gz /opt/asis/\n"
        "COPY x.tar /opt/copied/\n")
    name = f"add-{uuid.uuid4().hex[:6]}"
    build(cli, name, ctx)
    sb = make_sandbox(template=name)
    res = api.exec(sb["id"], cmd=["sh", "-c", "cat /opt/gz/pkg/hello.txt /opt/tar/pkg/hello.txt "
                                  "/opt/xz/pkg/hello.txt /opt/bz2/pkg/hello.txt "
                                  "/opt/zst/pkg/hello.txt"])
    assert res["exit_code"] == 0 and res["stdout"] == "hello from the archive\n" * 5, res
    res = api.exec(sb["id"], cmd=["sh", "-c", "cat /opt/asis/notes.tar.gz; "
                                  "gzip -dc /opt/asis/readme.txt.gz; "
                                  "test -f /opt/copied/x.tar && test ! -e /opt/copied/pkg && "
                                  "test ! -e /opt/gz/data.bin && echo ok"])
    assert res["stdout"] == "not an archive\ngzip, but no tar inside\nok\n", res


def test_add_hostile_archive_stays_in_the_rootfs(cli, api, make_sandbox, tmp_path):
    tag = uuid.uuid4().hex[:8]
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    deep = "../" * 12
    _tar(ctx / "evil.tgz", [
        ("ok.txt", "fine\n"),
        (f"{deep}tmp/isola-escape-{tag}", "escaped by ..\n"),
        (f"/tmp/isola-abs-{tag}", "escaped by an absolute name\n"),
        ("etcl", None, "/etc"),
        (f"etcl/isola-via-link-{tag}", "through an absolute symlink\n"),
        ("up", None, deep + "tmp"),
        (f"up/isola-via-up-{tag}", "through a ../ symlink\n"),
    ], mode="w:gz")
    (ctx / "Dockerfile").write_text("FROM host\nADD evil.tgz /opt/h/\n")
    name = f"evil-{uuid.uuid4().hex[:6]}"
    build(cli, name, ctx)
    # Nothing outside the template's root on the host.
    for p in (f"/tmp/isola-escape-{tag}", f"/tmp/isola-abs-{tag}", f"/etc/isola-via-link-{tag}",
              f"/tmp/isola-via-up-{tag}"):
        assert not pathlib.Path(p).exists(), f"{p} written on the host"
    sb = make_sandbox(template=name)
    res = api.exec(sb["id"], cmd=["sh", "-c", "cat /opt/h/ok.txt; ls -A /opt/h; "
                                  f"cat /etc/isola-via-link-{tag} /tmp/isola-via-up-{tag}; "
                                  f"ls /tmp/isola-escape-{tag} /tmp/isola-abs-{tag} "
                                  f"/opt/tmp /opt/h/tmp 2>&1 | grep -c 'No such file'"])
    # The ../ and absolute names were dropped; the links resolved inside the template's own
    # root, so what went through them is in the template's /etc and /tmp.
    assert res["stdout"] == ("fine\netcl\nok.txt\nup\nthrough an absolute symlink\n"
                             "through a ../ symlink\n4\n"), res


def test_cache_ls_and_prune(cli, api, isolad, make_sandbox, tmp_path):
    from tenancy_util import Tenant
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    tag = uuid.uuid4().hex[:8]
    (ctx / "f").write_text(tag + "\n")
    (ctx / "Dockerfile").write_text(f"FROM host\nCOPY f /f\nRUN echo ran-{tag} | tee /ran.txt\n")
    a, b, c = (f"cache-{tag}-{x}" for x in "abc")
    build(cli, a, ctx)
    _, ev, _ = build(cli, b, ctx)
    assert all(e["cached"] for e in ev if e["type"] == "layer"), ev

    cp = cli("template", "cache", "ls", json=True)
    assert cp.returncode == 0, cp.stderr
    mine = [e for e in json.loads(cp.stdout) if tag in (e.get("instruction") or "")]
    assert {e["kind"] for e in mine} == {"run"} and len(mine) == 1, mine
    copy = [e for e in json.loads(cp.stdout) if e.get("template") == a and e["kind"] == "copy"]
    assert len(copy) == 1 and copy[0]["tenant"] == "default" and copy[0]["size_bytes"] > 0, copy
    keys = {mine[0]["key"], copy[0]["key"]}
    human = cli("template", "cache", "ls")
    assert mine[0]["key"][:12] in human.stdout and "TENANT" in human.stdout, human.stdout

    # Another tenant sees none of these, and its prune --all removes none of them.
    t = Tenant(isolad)
    try:
        r = t.client.request("GET", "/v1/templates/build/cache")
        assert r.status == 200 and not keys & {e["key"] for e in r.json()["entries"]}, r.json()
        r = t.client.request("POST", "/v1/templates/build/cache/prune", json={"all": True})
        assert r.status == 200 and not keys & set(r.json()["removed"]), r.json()
    finally:
        t.cleanup()

    # Used just now: --older-than 1h keeps them; --all removes them.
    cp = cli("template", "cache", "prune", "--older-than", "1h", json=True)
    assert cp.returncode == 0 and not keys & set(json.loads(cp.stdout)["removed"]), cp.stdout
    cp = cli("template", "cache", "prune", "--all", json=True)
    out = json.loads(cp.stdout)
    assert keys <= set(out["removed"]) and out["freed_bytes"] > 0, out
    ls = json.loads(cli("template", "cache", "ls", json=True).stdout)
    assert not keys & {e["key"] for e in ls}, ls

    # A template built from the cache still works after the prune.
    sb = make_sandbox(template=b)
    res = api.exec(sb["id"], cmd=["sh", "-c", "cat /f /ran.txt"])
    assert res["stdout"] == f"{tag}\nran-{tag}\n", res
    # The pruned steps run again.
    _, ev, _ = build(cli, c, ctx)
    assert not any(e["cached"] for e in ev if e["type"] == "layer"), ev
    assert any(e["type"] == "output" and e["line"] == f"ran-{tag}" for e in ev), ev

    # Bad input names the problem.
    cp = cli("template", "cache", "prune")
    assert cp.returncode != 0 and "--all or --older-than" in cp.stderr, cp.stderr
    cp = cli("template", "cache", "prune", "--older-than", "soon")
    assert cp.returncode != 0 and "--older-than `soon`" in cp.stderr, cp.stderr
    r = isolad.client().request("POST", "/v1/templates/build/cache/prune",
                                json={"all": True, "older_than": 5})
    assert r.status == 400 and "older_than" in r.json()["message"], r


@pytest.mark.needs_microvm
def test_built_template_runs_in_the_microvm_tier(cli, tmp_path):
    """A template built by `template build` (its RUN in the process tier) boots in the microvm
    tier: the first create builds its ext4 image from the template's files (the host
    template's package closure for the /usr it binds). One test: TCG is slow."""
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    tag = uuid.uuid4().hex[:8]
    (ctx / "copied.txt").write_text(f"copied-{tag}\n")
    (ctx / "Dockerfile").write_text(
        "FROM host\n"
        "COPY copied.txt /opt/app/\n"
        f"RUN echo ran-{tag} > /opt/app/ran.txt && python3 -c 'print(1+1)' >> /opt/app/ran.txt\n"
        "WORKDIR /opt/app\n")
    name = f"vm-{tag}"
    build(cli, name, ctx)
    cp = cli("run", "--tier", "microvm", "--template", name, "--memory", "512M", "--",
             "sh", "-c", "uname -r; pwd; cat copied.txt ran.txt",
             timeout=900)  # conftest's MICROVM_CREATE_TIMEOUT: the image is built first
    assert cp.returncode == 0, (cp.stdout, cp.stderr)
    lines = cp.stdout.splitlines()
    assert lines[0].endswith("-cloud-amd64"), lines  # the guest's kernel, not the host's
    assert lines[1:] == ["/opt/app", f"copied-{tag}", f"ran-{tag}", "2"], lines


def test_build_tier_unknown_is_refused(cli, isolad, tmp_path):
    """`--tier` names a tier isolad knows; anything else is a 400 naming it, before any work."""
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM host\nRUN touch /should-not-run\n")
    cp, ev, _ = build(cli, f"tier-{uuid.uuid4().hex[:6]}", ctx, "--tier", "bogus", ok=False)
    assert cp.returncode != 0 and "tier `bogus` is unknown" in cp.stderr + cp.stdout, cp
    assert not [e for e in ev if e.get("type") == "step"], ev
    r = isolad.client().request(
        "POST", "/v1/templates/build",
        query={"name": "tier-x", "options": json.dumps({"tier": "kvm"})}, body=b"x")
    assert r.status == 400 and "tier `kvm` is unknown" in r.json()["message"], r


def _shell_layer():
    """A layer with dash, rm and cat and the libraries they load (from the host), so RUN
    steps have a shell in a template a few MiB small (its ext4 image builds in a second)."""
    import os
    import tarfile
    from imagebuild import tar_bytes
    D, F = tarfile.DIRTYPE, tarfile.REGTYPE
    entries = [("bin", None, 0o755, D), ("lib", None, 0o755, D),
               ("lib/x86_64-linux-gnu", None, 0o755, D), ("lib64", None, 0o755, D),
               ("etc", None, 0o755, D), ("etc/base.txt", b"from the base\n", 0o644, F)]
    for src, dst in [("/bin/dash", "bin/sh"), ("/bin/rm", "bin/rm"), ("/bin/cat", "bin/cat"),
                     ("/lib/x86_64-linux-gnu/libc.so.6", "lib/x86_64-linux-gnu/libc.so.6"),
                     ("/lib64/ld-linux-x86-64.so.2", "lib64/ld-linux-x86-64.so.2")]:
        entries.append((dst, pathlib.Path(os.path.realpath(src)).read_bytes(), 0o755, F))
    return tar_bytes(entries)


@pytest.mark.needs_microvm
def test_run_steps_in_the_microvm_tier(cli, api, isolad, tmp_path):
    """`template build --tier microvm`: each RUN boots a microvm from the template-so-far (a
    new ext4 image per step: the second RUN reads what the first wrote), the agent's
    fs_mark/fs_diff turns the guest's changes into a layer (a file written, a base file
    deleted), and the result runs in both tiers. The cache keys the tier. Slow by nature:
    every RUN and the microvm run each build an image and boot a guest (seconds each under
    TCG, more under load), so the steps are few and the failing RUN reuses the cached ones."""
    import imagebuild
    tag = uuid.uuid4().hex[:8]
    base = f"vmbase-{tag}"
    img = tmp_path / "base.tar"
    img.write_bytes(imagebuild.docker_archive(imagebuild.build_hello(tmp_path),
                                              extra_layers=[_shell_layer()]))
    cp = cli("template", "import", base, img, timeout=300)
    assert cp.returncode == 0, cp.stderr
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "copied.txt").write_text(f"copied-{tag}\n")
    steps = (f"FROM {base}\n"
             "COPY copied.txt /work/copied.txt\n"
             f"RUN echo ran-{tag} > /work/ran.txt && rm /etc/base.txt\n"
             "RUN cat /work/ran.txt /work/copied.txt > /work/read.txt\n")
    (ctx / "Dockerfile").write_text(steps)
    name = f"vmbuilt-{tag}"
    _, ev, t_vm = build(cli, name, ctx, "--tier", "microvm", timeout=1800)
    assert [e["cached"] for e in ev if e["type"] == "layer"] == [False, False, False], ev
    info = json.loads(cli("template", "inspect", name, json=True).stdout)
    assert info["config"]["build_tier"] == "microvm", info  # the tier it was built in
    # the guest's layers are OCI-style .tar entries, still listed as RUN entries
    mine = [e for e in json.loads(cli("template", "cache", "ls", json=True).stdout)
            if e.get("template") == name]
    assert sorted(e["kind"] for e in mine) == ["copy", "run", "run"], mine
    check = ("cat /work/read.txt; test ! -e /etc/base.txt && echo base-gone; "
             "cat /etc/new")
    want = [f"ran-{tag}", f"copied-{tag}", "base-gone", "added by layer 2"]
    cp = cli("run", "--template", name, "--", "sh", "-c", check)
    assert cp.returncode == 0 and cp.stdout.splitlines() == want, (cp.stdout, cp.stderr)
    cp = cli("run", "--tier", "microvm", "--template", name, "--memory", "256M", "--",
             "sh", "-c", check, timeout=900)
    assert cp.returncode == 0 and cp.stdout.splitlines() == want, (cp.stdout, cp.stderr)

    # a rebuild hits the microvm entries; a process-tier build of the same file does not
    _, ev, _ = build(cli, f"{name}-again", ctx, "--tier", "microvm", timeout=600)
    assert [e["cached"] for e in ev if e["type"] == "layer"] == [True, True, True], ev
    _, ev, t_proc = build(cli, f"{name}-proc", ctx, "--tier", "process", timeout=600)
    assert [e["cached"] for e in ev if e["type"] == "layer"] == [True, False, False], ev
    # measured, not asserted (docs/templates.md "Tiers" quotes it): the two RUN steps cold
    print(f"\nbuild with 2 cold RUN steps: --tier microvm {t_vm:.1f} s, "
          f"--tier process {t_proc:.1f} s")
    cp = cli("run", "--template", f"{name}-proc", "--", "sh", "-c", check)
    assert cp.returncode == 0 and cp.stdout.splitlines() == want, (cp.stdout, cp.stderr)

    # a failing RUN in the microvm (after the cached prefix): step, exit code, no template
    (ctx / "Dockerfile").write_text(steps + "RUN echo about to fail && exit 7\n")
    bad = f"{name}-bad"
    cp, ev, _ = build(cli, bad, ctx, "--tier", "microvm", ok=False, timeout=900)
    assert cp.returncode != 0 and ev[-1]["type"] == "error", ev
    msg = ev[-1]["message"]
    assert "exit code 7" in msg and "about to fail" in msg and "step 4/4" in msg, msg
    assert [e for e in ev if e["type"] == "run_failed"][0]["exit_code"] == 7, ev
    assert cli("template", "inspect", bad).returncode != 0
    assert not list((pathlib.Path(isolad.state_dir) / "templates").glob(".tmp-*"))
    assert not [s for s in sandboxes(api) if s.get("labels", {}).get("isola.build")]


def test_build_tier_microvm_without_a_kernel_is_refused_before_any_step(tmp_path):
    """An isolad that cannot boot a microvm (here: no guest kernel in its view, by a tmpfs over
    /var/lib/isola/kernels in its own mount namespace) refuses `tier: microvm` up front:
    `unavailable` naming the tier, no step started, no template, no sandbox."""
    import io
    import os
    import tarfile
    from faults_util import Isolad, need_root_tool
    need_root_tool("unshare")
    wrap = []
    if os.path.isdir("/var/lib/isola/kernels"):
        wrap = ["unshare", "-m", "sh", "-c",
                'mount -t tmpfs none /var/lib/isola/kernels && exec "$@"', "isolad"]
    ctx = io.BytesIO()
    with tarfile.open(fileobj=ctx, mode="w") as t:
        data = b"FROM host\nRUN touch /should-not-run\n"
        ti = tarfile.TarInfo("Dockerfile")
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    d = Isolad(extra_env={"ISOLA_KERNEL_DIR": str(tmp_path / "no-kernels")}, wrap=wrap)
    try:
        r = d.client().request(
            "POST", "/v1/templates/build", body=ctx.getvalue(),
            headers={"Content-Type": "application/x-tar"},
            query={"name": "vm-none", "options": json.dumps({"tier": "microvm"})},
            timeout=120)
        ev = [json.loads(x) for x in r.text.splitlines() if x.strip()]
        assert ev and ev[-1]["type"] == "error" and ev[-1]["code"] == "unavailable", (r, ev)
        assert "tier `microvm`" in ev[-1]["message"], ev[-1]
        assert not [e for e in ev if e["type"] == "step"], ev
        assert d.client().request("GET", "/v1/templates/vm-none").status == 404
        assert not d.client().request("GET", "/v1/sandboxes").json().get("sandboxes")
    finally:
        d.stop()
