# SPDX-License-Identifier: Apache-2.0
"""Shared by tests/integration and tests/security. Fixtures: one real isolad per session (restartable), sandboxes, and the real CLI.

Environment:
  ISOLA_BUILD   build tree with src/isolad/isolad and src/cli/isola (default <repo>/build)
  ISOLA_AGENT   static agent binary (default <repo>/build/src/agent/isola-agent)
  ISOLA_KEEP_STATE=1  keep the state directory after the session (debugging)
  ISOLA_TIERS   comma-separated tiers that tiers-marked tests run on (default process,microvm)

Tiers: a module or test marked `pytest.mark.tiers("process", "microvm")` runs once per tier
(its `tier` parameter; make_sandbox and sandbox create on that tier). Unmarked tests run on
the process tier only. `pytest.mark.process_only("why")` keeps one test of a tiers module on
the process tier. The microvm half is skipped outside CI when QEMU or a guest kernel is
missing (`needs_microvm`); in CI (CI=true) a missing piece fails.

Every wait is bounded. A missing binary fails the session (never a silent skip). A sanitizer
report on isolad's or the CLI's stderr fails the test during which it appeared. A test's own
`Isolad` is thrown away with `discard()` (or `discard_problems()`), which fails on what the
session isolad's teardown fails on.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "integration"))

import isola_client as ic  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BUILD = Path(os.environ.get("ISOLA_BUILD") or REPO / "build")
ISOLAD = BUILD / "src" / "isolad" / "isolad"
CLI = BUILD / "src" / "cli" / "isola"
AGENT = Path(os.environ.get("ISOLA_AGENT") or REPO / "build" / "src" / "agent" / "isola-agent")

SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer")
START_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0
MICROVM_CREATE_TIMEOUT = 900  # the first microvm create builds the template's ext4 image

# isolad builds the host template's microvm image (the package closure, docs/microvm.md) in the
# background at start; most test isolads never boot a microvm, so leave it to the first microvm
# create (tests/integration/test_microvm_image.py turns it on). Set before any isolad starts.
os.environ.setdefault("ISOLA_MICROVM_PREBUILD", "0")


def microvm_missing():
    """Why the microvm tier cannot run here (no QEMU, no kernel), or None."""
    if not os.access("/usr/bin/qemu-system-x86_64", os.X_OK):
        return "qemu-system-x86 is not installed"
    for d in (os.environ.get("ISOLA_KERNEL_DIR", ""), "/var/lib/isola/kernels"):
        if d and any(Path(d).glob("*/modules.cpio")):
            return None
    return "no guest kernel (run scripts/kernel.sh)"


def pytest_configure(config):
    config.addinivalue_line("markers", "tiers(*names): run the test once per named tier")
    config.addinivalue_line("markers", "process_only(reason): the subject is process-tier only")
    config.addinivalue_line("markers", "fresh_sandbox: the `sandbox` fixture is never shared")
    config.addinivalue_line("markers", "needs_microvm: skipped outside CI without QEMU/kernel")
    config.addinivalue_line("markers", "host_exclusive: judges host-wide state (every isola "
                            "cgroup or agent on the host, the host's routing rules), so no other "
                            "isolad may work meanwhile: scripts/test.sh runs these alone, after "
                            "its two concurrent sessions")


def pytest_sessionfinish(session, exitstatus):
    """After a green session, the state dirs its isolads left under /tmp (the ones a test
    module made and did not remove; a microvm one holds a ~3 GB template image) are removed:
    only the dirs this session's Isolad objects made (recorded in ic.MADE_STATE_DIRS: never
    by name, since a concurrent session's dirs look the same), that no isolad holds (its lock
    is free) and no mount references. A failed session keeps them for the post-mortem, as
    ISOLA_KEEP_STATE does."""
    import fcntl
    if exitstatus != 0 or os.environ.get("ISOLA_KEEP_STATE"):
        return
    for d in ic.MADE_STATE_DIRS:
        try:
            if ic.mounts_referencing(d):
                continue
            with open(os.path.join(d, "isolad.lock"), "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # gone, or an isolad still holds it
        shutil.rmtree(d, ignore_errors=True)


def pytest_generate_tests(metafunc):
    """Parametrises `tier` for tests marked tiers(...); module-scoped, so a module's tests
    on one tier run together and share module-scoped sandboxes."""
    m = metafunc.definition.get_closest_marker("tiers")
    if "tier" not in metafunc.fixturenames or m is None:
        return
    wanted = os.environ.get("ISOLA_TIERS", "process,microvm").split(",")
    po = metafunc.definition.get_closest_marker("process_only")
    names = [t for t in m.args if t in wanted and (po is None or t == "process")]
    metafunc.parametrize("tier", [pytest.param(t, marks=[pytest.mark.needs_microvm]
                                               if t == "microvm" else []) for t in names],
                         scope="module")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    # Within each module, every process-tier test before every microvm one: pytest's own
    # order interleaves them when other parameters are present, and each switch would
    # tear down and boot the module's shared VM again.
    def tier_rank(item):
        cs = getattr(item, "callspec", None)
        return 1 if cs is not None and cs.params.get("tier") == "microvm" else 0
    modules = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    items[:] = [i for group in modules.values() for i in sorted(group, key=tier_rank)]
    why = microvm_missing()
    if not why or os.environ.get("CI") == "true":
        return
    skip = pytest.mark.skip(reason=f"microvm tier: {why} (skipped outside CI only)")
    for item in items:
        if item.get_closest_marker("needs_microvm"):
            item.add_marker(skip)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sanitizer_report(text):
    for m in SANITIZER_MARKERS:
        i = text.find(m)
        if i >= 0:
            return text[max(0, i - 200):i + 4000]
    return None


# Concurrent pytest sessions (scripts/test.sh runs two) give their isolads disjoint host uid
# ranges (docs/process-tier.md "Host uid ranges"), so a test judging "processes in this
# sandbox's uid range" never sees the other session's sandboxes. Every isolad a test starts
# gets these arguments (at each start, unless its own arguments name a base).
UID_BASE_ARGS = (["--uid-base", os.environ["ISOLA_TEST_UID_BASE"]]
                 if os.environ.get("ISOLA_TEST_UID_BASE") else [])


class Isolad:
    """A real isolad process on a private state dir, socket and TCP port."""

    def __init__(self, extra_env=None, extra_args=(), tty=False, state_dir=None, wrap=(),
                 port=None, pool_auto=0):
        """extra_env/extra_args: added to every start (test hooks such as
        ISOLA_TEST_NO_OPENAT2, --idle-timeout). tty: run isolad as the leader of a session
        whose controlling terminal is a fresh pty, as when an operator starts it from a
        shell (tests/security checks that no sandbox reaches that terminal). state_dir: an
        existing (short) directory to use instead of a fresh one under /tmp, e.g. a mount of
        a filesystem under test; the caller removes it. wrap: a command prefix that execs
        isolad, e.g. ["nsenter", "--net=/run/netns/X"] to run it in a test's network namespace.
        port: the API's TCP port (default: one free here; give one with `wrap` into a netns).
        pool_auto: the `--pool-auto` given at every start unless extra_args has its own: 0
        (default) pins isolad's automatic warm pool off, so tests that count sandboxes,
        cgroups, network slots or capacity see only what they made; None gives no flag
        (isolad's default, on, or its stored setting)."""
        self.wrap = [str(a) for a in wrap]
        self.extra_env = dict(extra_env or {})
        self.extra_args = [str(a) for a in extra_args]
        self.pool_auto = pool_auto
        self.tty = tty
        self.pty_master = None
        self.pty_name = None
        for what, p in (("isolad", ISOLAD), ("agent", AGENT)):
            if not os.access(p, os.X_OK):
                pytest.fail(f"{what} binary `{p}` is missing or not executable: build first "
                            f"(ninja -C build) or set ISOLA_BUILD/ISOLA_AGENT", pytrace=False)
        # Short path: sockets under the state dir must fit sun_path (108 bytes).
        self.state_dir = state_dir
        if not state_dir:
            self.state_dir = tempfile.mkdtemp(prefix="isola-it-", dir="/tmp")
            ic.MADE_STATE_DIRS.append(self.state_dir)  # for pytest_sessionfinish
        os.chmod(self.state_dir, 0o700)
        self.socket = os.path.join(self.state_dir, "isolad.sock")
        self.port = port or free_port()
        self.tcp = ("127.0.0.1", self.port)
        self.url = f"http://127.0.0.1:{self.port}"
        self.logs = []  # one stderr file per start
        self.log_pos = {}  # path -> bytes already checked for sanitizer reports
        self.proc = None
        self.starts = 0
        self.start()

    @property
    def token(self):
        with open(os.path.join(self.state_dir, "api.token")) as f:
            return f.read().strip()

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def client(self, **kw):
        return ic.Client(socket_path=self.socket, **kw)

    def tcp_client(self, token=None, **kw):
        return ic.Client(tcp=self.tcp, token=token, **kw)

    def log_text(self):
        out = []
        for p in self.logs:
            try:
                out.append(Path(p).read_text(errors="replace"))
            except OSError:
                pass
        return "\n".join(out)

    def start(self):
        assert self.proc is None or self.proc.poll() is not None, "isolad already running"
        self.starts += 1
        log = os.path.join(self.state_dir, f"isolad.stderr.{self.starts}")
        self.logs.append(log)
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
        env.update(self.extra_env)
        stdin, preexec, slave = subprocess.DEVNULL, None, None
        if self.tty:
            import fcntl
            import termios
            if self.pty_master is None:
                self.pty_master, slave = os.openpty()
                self.pty_name = os.ttyname(slave)
            else:
                slave = os.open(self.pty_name, os.O_RDWR | os.O_NOCTTY)
            stdin = slave

            def preexec():  # after setsid (start_new_session): take the pty as ctty
                fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        with open(log, "wb") as errf:
            self.proc = subprocess.Popen(
                self.wrap + [str(ISOLAD), "--state-dir", self.state_dir, "--socket", self.socket,
                 "--listen", f"127.0.0.1:{self.port}", "--agent", str(AGENT),
                 "--log-level", "debug"] + self.extra_args +
                ([] if "--uid-base" in self.extra_args else UID_BASE_ARGS) +
                ([] if self.pool_auto is None or "--pool-auto" in self.extra_args
                 else ["--pool-auto", str(self.pool_auto)]),
                stdin=stdin, stdout=errf, stderr=errf, env=env,
                start_new_session=True, preexec_fn=preexec)
        if slave is not None:
            os.close(slave)
        deadline = time.monotonic() + START_TIMEOUT
        c = ic.Client(socket_path=self.socket, timeout=2)
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"isolad exited with {self.proc.returncode} during start:\n"
                            f"{Path(log).read_text(errors='replace')[-4000:]}", pytrace=False)
            if os.path.exists(self.socket):
                try:
                    if c.request("GET", "/v1/health").status == 200:
                        return
                except OSError:
                    pass
            if time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait(5)
                pytest.fail(f"isolad did not answer /v1/health within {START_TIMEOUT}s:\n"
                            f"{Path(log).read_text(errors='replace')[-4000:]}", pytrace=False)
            time.sleep(0.05)

    def stop(self, kill9=False):
        """Stops isolad; returns its exit status. SIGTERM must end it within STOP_TIMEOUT."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        if kill9:
            self.proc.send_signal(signal.SIGKILL)
            return self.proc.wait(STOP_TIMEOUT)
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise AssertionError(f"isolad did not exit within {STOP_TIMEOUT}s of SIGTERM")

    def restart(self, kill9=False):
        rc = self.stop(kill9=kill9)
        if not kill9:
            assert rc == 0, f"isolad exited with {rc} on SIGTERM:\n{self.log_text()[-3000:]}"
        self.start()

    def close_tty(self):
        if self.pty_master is not None:
            os.close(self.pty_master)
            self.pty_master = None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def new_sanitizer_reports(self):
        """Sanitizer reports written since the last call."""
        found = []
        for p in self.logs:
            try:
                with open(p, "rb") as f:
                    f.seek(self.log_pos.get(p, 0))
                    data = f.read()
                    self.log_pos[p] = f.tell()
            except OSError:
                continue
            rep = sanitizer_report(data.decode(errors="replace"))
            if rep:
                found.append(f"{p}:\n{rep}")
        return found

    def destroy_all_sandboxes(self):
        c = self.client(timeout=30)
        try:
            for sb in c.list_sandboxes():
                c.delete_sandbox(sb["id"])
        except (OSError, AssertionError) as e:
            print(f"isolad teardown: could not destroy sandboxes: {e}", file=sys.stderr)

    def discard_problems(self, keep_state=False, expect_running=False):
        """Throws this isolad away: destroys its sandboxes, stops it, and returns what is wrong
        as strings: a non-zero status on SIGTERM (or, with expect_running, that it was not
        running), sanitizer reports in its logs, mounts still referencing its state dir
        (a state dir the caller gave may itself be a mount point: that one is the caller's).
        The state dir is removed unless keep_state (the caller's to remove), ISOLA_KEEP_STATE
        or a problem (the last string then says where it was kept). Idempotent: once
        discarded and stopped, a second call does nothing and returns []."""
        if getattr(self, "_discarded", False) and not self.alive():
            return []
        self._discarded = True
        problems = []
        if self.alive():
            self.destroy_all_sandboxes()
            try:
                rc = self.stop()
                if rc != 0:
                    problems.append(f"isolad exited with status {rc} on SIGTERM")
            except AssertionError as e:
                problems.append(str(e))
        elif expect_running:
            rc = None if self.proc is None else self.proc.returncode
            problems.append(f"isolad was not running when discarded (status {rc}):\n"
                            f"{self.log_text()[-3000:]}")
        self.close_tty()
        self.drop_nft_table()
        problems += [f"sanitizer report from isolad: {r}" for r in self.new_sanitizer_reports()]
        given = self.state_dir not in ic.MADE_STATE_DIRS
        mounts = [m for m in ic.mounts_referencing(self.state_dir)
                  if not (given and m.split()[4] == self.state_dir)]
        if mounts:
            problems.append(f"mounts still reference the state dir {self.state_dir}:\n" +
                            "\n".join(mounts))
        if problems:
            problems.append(f"(state and logs kept in {self.state_dir})")
        elif os.environ.get("ISOLA_KEEP_STATE"):
            if not keep_state:
                print(f"isolad state kept in {self.state_dir} (ISOLA_KEEP_STATE)",
                      file=sys.stderr)
        elif not keep_state:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        return problems

    def drop_nft_table(self):
        """A stopped isolad's nftables table, when it is left and serves no sandbox. A clean
        stop removes it (net_stop) unless sandboxes keep running; a killed isolad leaves it
        for its restart on the same state dir to take back, and a test that discards a
        killed isolad has no restart: the table goes by its name (FNV-1a of the state dir),
        once no sandbox record of this isolad is left."""
        if self.alive():
            return
        try:
            if os.listdir(os.path.join(self.state_dir, "sandboxes")):
                return
        except FileNotFoundError:
            pass
        table = ic.nft_table(self.state_dir)
        if subprocess.run(["nft", "list", "table", "inet", table], capture_output=True,
                          timeout=30).returncode == 0:
            subprocess.run(["nft", "delete", "table", "inet", table], check=True,
                           capture_output=True, timeout=30)

    def discard(self, keep_state=False, expect_running=False):
        """discard_problems(), failing the test (or fixture) on any problem."""
        problems = self.discard_problems(keep_state=keep_state, expect_running=expect_running)
        if problems:
            pytest.fail("\n\n".join(problems), pytrace=False)


@pytest.fixture(scope="session")
def isolad():
    d = Isolad()
    yield d
    d.discard(expect_running=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report carries what the session isolad logged at warn/error level (and
    its last lines) while the test ran: the evidence a CI log needs for a failure that does not
    repeat on a developer's machine."""
    outcome = yield
    rep = outcome.get_result()
    marks = getattr(item, "_isolad_log_marks", None)
    if not rep.failed or not marks:
        return
    d, start = marks
    lines = []
    for path, pos in start.items():
        try:
            with open(path, "rb") as f:
                f.seek(pos)
                lines += f.read().decode(errors="replace").splitlines()
        except OSError:
            pass
    bad = [l for l in lines if '"level":"warn' in l or '"level":"error' in l]
    if lines:
        rep.sections.append(("isolad log during this test (warn/error, then the last 15 lines)",
                             "\n".join(bad[-40:] + ["..."] + lines[-15:])))


@pytest.fixture(autouse=True)
def _isolad_watch(request, isolad):
    """After each test: isolad must still run and must not have written a sanitizer report."""
    request.node._isolad_log_marks = (isolad, {p: os.path.getsize(p) for p in isolad.logs
                                               if os.path.exists(p)})
    yield
    reports = isolad.new_sanitizer_reports()
    if reports:
        pytest.fail("isolad wrote a sanitizer report during this test:\n" + "\n".join(reports),
                    pytrace=False)
    if not isolad.alive():
        rc = isolad.proc.returncode
        tail = isolad.log_text()[-3000:]
        isolad.start()  # later tests get a daemon again
        pytest.fail(f"isolad died during this test (status {rc}):\n{tail}", pytrace=False)


@pytest.fixture
def api(isolad):
    """A client on isolad's unix socket."""
    return isolad.client()


@pytest.fixture(scope="session")
def tier():
    """The tier tests create sandboxes on; tests marked tiers(...) get it parametrised."""
    return "process"


def create_on_tier(c, tier, fields):
    """POST /v1/sandboxes on `tier` unless fields name one (process: the request as before)."""
    if tier != "process" and "tier" not in fields:
        fields = dict(fields, tier=tier)
    if fields.get("tier", "process") == "process":
        return c.create_sandbox(**fields)
    r = c.request("POST", "/v1/sandboxes", json=fields, timeout=MICROVM_CREATE_TIMEOUT)
    assert r.status == 201, f"create {fields}: {r}"
    return r.json()


@pytest.fixture
def make_sandbox(isolad, tier):
    """Factory: make_sandbox(**fields) creates a sandbox (on `tier` unless fields say) that is
    destroyed after the test."""
    made = []
    c = isolad.client()

    def make(**fields):
        sb = create_on_tier(c, tier, fields)
        made.append(sb["id"])
        return sb

    yield make
    for sid in made:
        if isolad.alive():
            try:
                r = c.delete_sandbox(sid)
                assert r.status in (204, 404, 410), f"teardown DELETE {sid}: {r}"
            except OSError:
                pass


class SharedSandbox:
    """One default sandbox per module and tier, made on first use and replaced if it stopped
    running. Between tests its still-running processes are killed."""

    def __init__(self, isolad, tier):
        self.isolad, self.tier, self.sb = isolad, tier, None

    def get(self):
        c = self.isolad.client()
        if self.sb is not None:
            r = c.request("GET", f"/v1/sandboxes/{self.sb['id']}")
            if r.status == 200 and r.json()["state"] == "running":
                return self.sb
            self.close()
        self.sb = create_on_tier(c, self.tier, {})
        return self.sb

    def tidy(self):
        """Kills what the last test left running (a fresh sandbox would not have it)."""
        if self.sb is None or not self.isolad.alive():
            return
        c = self.isolad.client()
        r = c.request("GET", f"/v1/sandboxes/{self.sb['id']}/processes")
        for p in ic.item_list(r.json(), "processes") if r.status == 200 else []:
            if p.get("running"):
                c.request("POST", f"/v1/sandboxes/{self.sb['id']}/processes/{p['pid']}/signal",
                          json={"signal": "KILL"})

    def close(self):
        if self.sb is not None and self.isolad.alive():
            try:
                self.isolad.client(timeout=30).delete_sandbox(self.sb["id"])
            except OSError:
                pass
        self.sb = None


@pytest.fixture(scope="module")
def shared_sandbox(isolad, tier):
    s = SharedSandbox(isolad, tier)
    yield s
    s.close()


@pytest.fixture
def sandbox(request, tier, make_sandbox):
    """One default sandbox (its JSON object). Process tier: a fresh one, destroyed after the
    test. Other tiers: the module's shared one (each microvm boot costs seconds of CPU) unless
    the test is marked fresh_sandbox; processes it leaves running are killed after it."""
    if tier == "process" or request.node.get_closest_marker("fresh_sandbox"):
        yield make_sandbox()
        return
    shared = request.getfixturevalue("shared_sandbox")
    yield shared.get()
    shared.tidy()


@pytest.fixture
def cli(isolad):
    """cli(*args, input=None, timeout=60, json=False, env=None, cwd=None) -> CompletedProcess."""
    if not os.access(CLI, os.X_OK):
        pytest.fail(f"CLI binary `{CLI}` is missing or not executable", pytrace=False)

    def run(*args, input=None, timeout=60, json=False, env=None, cwd=None):
        argv = [str(CLI), "--socket", isolad.socket] + (["--json"] if json else []) + \
            [str(a) for a in args]
        e = dict(os.environ)
        e.pop("ISOLA_URL", None)
        e.pop("ISOLA_TOKEN", None)
        e.update(env or {})
        if isinstance(input, str):
            input = input.encode()
        try:
            cp = subprocess.run(argv, input=input, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, timeout=timeout, env=e, cwd=cwd,
                                stdin=None if input is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired as ex:
            raise AssertionError(f"`isola {' '.join(map(str, args))}` did not finish in "
                                 f"{timeout}s; stdout {ex.stdout!r} stderr {ex.stderr!r}") from None
        rep = sanitizer_report(cp.stderr.decode(errors="replace"))
        assert rep is None, f"sanitizer report from the CLI (`isola {args}`):\n{rep}"
        return cp

    run.path = str(CLI)
    return run
