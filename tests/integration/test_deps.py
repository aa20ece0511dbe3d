# SPDX-License-Identifier: Apache-2.0
"""Every external command isola and its tests run comes from a package scripts/deps.sh installs.

The commands are found in the tree, not listed by hand (a list would drift):
- C (src/, tests/, fuzz/): absolute program paths ("/usr/bin/qemu-img"), the first element of
  an argv array literal (`char *argv[] = {"mkfs.ext4", ...}`), and the shell command lines given
  to system()/popen()/sh() or built with snprintf(cmd, ...);
- Python (tests/, scripts/, sdk/python): the program of subprocess calls and of netlab's sh()
  (a list literal's first element, or sh's first argument), shutil.which() arguments, `cmd=`
  and `wrap=` lists (commands run inside a sandbox come from the host template, the host's
  /usr), and the command lines of `sh -c` lists and of `.sh(sandbox, "...")` calls;
- shell scripts (scripts/, tests/, bench/): the word in command position of each simple command.

Each is resolved like `command -v` (PATH plus the sbin directories), then to a file with
realpath, and `dpkg -S` names its package, trying the /usr-merged twin (/bin/x and /usr/bin/x)
too. The package must be in deps.sh's PKGS list or be one every Debian system has (Essential,
or Priority required: read from dpkg, not listed here). isola's own programs (meson
executable() names) and the exceptions in NOT_DEBIAN are left out. A command that is not
installed at all fails as well: that is the gap this check exists for (nft once, run by a
security test, on a machine where nobody had installed nftables by hand).
"""

import ast
import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEPS = REPO / "scripts" / "deps.sh"
# A fresh root shell's PATH: what a developer's own PATH adds (pyenv shims) is not a dependency.
SEARCH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Commands that do not come from Debian's archive on purpose, each with its reason.
NOT_DEBIAN = {
    # deps.sh checks node's version itself: Debian 12's nodejs is too old for the e2b package,
    # so node and npm come from the machine's image (docs/dependencies.md).
    "node": "node >= 20.18.1, version-checked by deps.sh",
    "npm": "ships with node",
    "npx": "ships with node",
    # A program of the test image tests/integration/imagebuild.py builds, run inside it.
    "hello": "inside a test image",
}

SKIP_DIRS = {"node_modules", ".git", "build", "build-asan", "corpus", "__pycache__"}
# A program name, or an absolute path in a system directory (other absolute paths are files of
# a sandbox's own template: /probe, /tmp/run.sh).
NAME = re.compile(r"^(/(usr/|bin/|sbin/)[\w.+/-]+|[A-Za-z0-9_][\w.+-]*)$")

# Shell words that are never programs: keywords and builtins (bash's own list), and `[`.
SHELL_WORDS = set(subprocess.run(["bash", "-c", "compgen -k; compgen -b"], capture_output=True,
                                 text=True).stdout.split()) | {"[", "[["}


def files(subdirs, suffixes):
    for d in subdirs:
        for root, dirs, names in os.walk(REPO / d):
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS]
            for n in names:
                if n.endswith(suffixes):
                    yield Path(root) / n


def rel(p):
    return str(Path(p).relative_to(REPO))


# ---- shell command lines -------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def shell_functions():
    """Functions defined in the tree's shell scripts (a script may call one it sources)."""
    names = set()
    for p in files(["scripts", "tests", "bench"], (".sh",)):
        names |= set(re.findall(r"^\s*(?:function\s+)?([\w-]+)\s*\(\)", p.read_text(), re.M))
    return names


def shell_commands(text):
    """The words in command position of a shell script or command line (approximate: enough
    for the scripts in this tree; heredoc bodies, quoted strings and case patterns are not
    commands)."""
    out, lines, marker = [], [], None
    for line in text.replace("\\\n", " ").splitlines():  # continuation lines joined
        if marker:
            if line.strip() == marker:
                marker = None
            continue
        # A heredoc's marker is a word, never a number: `(1 << 30)` is arithmetic.
        m = re.search(r"<<-?\s*['\"]?([A-Za-z_]\w*)['\"]?", line)
        if m:
            marker = m.group(1)
        lines.append(re.sub(r"(^|\s)#.*", "", line))  # comments first: "isolad's" is no quote
    text = "\n".join(lines)
    text = re.sub(r"\b\w+=\((.*?)\)", " Q ", text, flags=re.S)  # array assignments
    text = re.sub(r"\d*[<>]&\d*-?|&>", " ", text)  # fd redirections
    subs = []
    while True:  # $(...) innermost first: they hold commands even inside double quotes
        found = re.findall(r"\$\(([^()]*)\)", text)
        if not found:
            break
        subs += found
        text = re.sub(r"\$\(([^()]*)\)", " SUB ", text)
    for chunk in [text] + subs:
        chunk = re.sub(r"'[^']*'|\"(\\.|[^\"\\])*\"", " Q ", chunk)
        chunk = re.sub(r"\$?\(\((.*?)\)\)", " Q ", chunk, flags=re.S)  # arithmetic
        chunk = re.sub(r"(^|\bin\b|;;)[^()\n;]*\)", "\n", chunk, flags=re.M)  # case patterns
        for seg in re.split(r"&&|\|\||[;|&(){}\n`!]", chunk):
            words = seg.split()
            while words and (re.match(r"^\w+=", words[0]) or
                             re.match(r"^\d*[<>]", words[0]) or
                             words[0] in ("if", "then", "else", "elif", "while", "until", "do",
                                          "time", "exec", "command", "sudo", "nohup", "env",
                                          "timeout", "xargs", "!")):
                if words[0] in ("timeout",) and len(words) > 1:
                    words = words[1:]  # timeout's duration follows
                words = words[1:]
            if not words:
                continue
            w = words[0]
            if w in SHELL_WORDS or w in shell_functions() or not NAME.match(w) or \
                    w in ("Q", "SUB"):
                continue
            out.append(w)
    return out


# ---- C ---------------------------------------------------------------------------------------

C_STRING = r'"((?:\\.|[^"\\\n])*)"'


def c_unescape(s):
    return s.replace("\\n", "\n").replace("\\t", "\t").replace('\\"', '"').replace("\\\\", "\\")


def c_commands(path, text):
    found = []
    text_nc = re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)
    for m in re.finditer(r'"(/(?:usr/)?s?bin/[\w.+-]+)', text_nc):
        found.append(m.group(1))
    for m in re.finditer(r"\w*argv\w*\s*\[\]\s*=\s*\{\s*" + C_STRING, text_nc):
        found.append(m.group(1))
    # Shell command lines: system/popen/sh("..."), snprintf(cmd, sizeof(cmd), "..." "...").
    for m in re.finditer(r"(?:\bsystem|\bpopen|\bsh)\(\s*((?:" + C_STRING + r"\s*)+)|"
                         r"snprintf\(\s*cmd\s*,\s*sizeof\(cmd\)\s*,\s*((?:" + C_STRING +
                         r"\s*)+)", text_nc):
        lits = m.group(1) or m.group(3)
        line = "".join(c_unescape(x) for x in re.findall(C_STRING, lits))
        found += [w for w in shell_commands(line) if not w.startswith("%")]
    return found


# ---- Python ----------------------------------------------------------------------------------

EXEC_FUNCS = {"run", "Popen", "check_output", "check_call", "call", "sh", "execvp", "execv",
              "execlp", "getoutput", "getstatusoutput"}


def first_str(node):
    if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
        e = node.elts[0]
        if isinstance(e, ast.Constant) and isinstance(e.value, str):
            return e.value, node
    return None, None


def py_commands(path, text):
    found = []
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return found

    def from_list(node):
        name, lst = first_str(node)
        if name is None:
            return
        found.append(name)
        if name in ("sh", "bash") and len(lst.elts) > 2 and isinstance(lst.elts[1], ast.Constant) \
                and lst.elts[1].value == "-c" and isinstance(lst.elts[2], ast.Constant) \
                and isinstance(lst.elts[2].value, str):
            found.extend(shell_commands(lst.elts[2].value))

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        fname = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if fname == "which" and node.args and isinstance(node.args[0], ast.Constant):
            found.append(node.args[0].value)
        if fname in EXEC_FUNCS and node.args:
            a0 = node.args[0]
            from_list(a0)
            if isinstance(a0, ast.Constant) and isinstance(a0.value, str):
                if fname == "sh":
                    found.append(a0.value)  # netlab.sh("ip", "link", ...)
                elif any(k.arg == "shell" for k in node.keywords) or \
                        fname in ("getoutput", "getstatusoutput"):
                    found.extend(shell_commands(a0.value))
            elif fname == "sh" and len(node.args) >= 2 and \
                    isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                found.extend(shell_commands(node.args[1].value))  # client.sh(sandbox, "...")
        for k in node.keywords:
            if k.arg in ("cmd", "argv", "wrap"):
                from_list(k.value)
    return found


# ---- the tree's commands -------------------------------------------------------------------

def own_programs():
    names = set()
    for p in files(["src", "tests", "fuzz", "bench"], ("meson.build",)):
        names |= set(re.findall(r"executable\(\s*'([^']+)'", p.read_text()))
    return names


@functools.lru_cache(maxsize=None)
def commands():
    """{command: [where it is run, ...]} for every external command found in the tree."""
    seen = {}

    def add(name, where):
        name = name.strip()
        if NAME.match(name):
            seen.setdefault(name, []).append(where)

    for p in files(["src", "tests", "fuzz", "bench"], (".c",)):
        for name in c_commands(p, p.read_text(errors="replace")):
            add(name, rel(p))
    for p in files(["tests", "scripts", "sdk/python", "bench"], (".py",)):
        for name in py_commands(p, p.read_text(errors="replace")):
            add(name, rel(p))
    for p in files(["scripts", "tests", "bench"], (".sh",)):
        for name in shell_commands(p.read_text(errors="replace")):
            add(name, rel(p))
    own = own_programs()
    return {n: sorted(set(w)) for n, w in seen.items()
            if os.path.basename(n) not in own and n not in NOT_DEBIAN}


@functools.lru_cache(maxsize=None)
def deps_packages():
    """PKGS of scripts/deps.sh (comments dropped) and what it installs outside the list."""
    text = DEPS.read_text()
    m = re.search(r"^PKGS=\((.*?)^\)", text, re.S | re.M)
    assert m, f"{DEPS}: no PKGS=( ... ) list"
    pkgs = set(re.sub(r"#[^\n]*", "", m.group(1)).split())
    # What they pull in comes with them (/usr/bin/python3 is python3-minimal's, for python3).
    out = subprocess.run(["apt-cache", "depends", "--recurse", "--installed", "--no-recommends",
                          "--no-suggests", "--no-conflicts", "--no-breaks", "--no-replaces",
                          "--no-enhances", *sorted(pkgs)], capture_output=True, text=True).stdout
    return pkgs | {l.strip().split(":")[0] for l in out.splitlines()
                   if l and not l[0].isspace() and not l.startswith("<")}


@functools.lru_cache(maxsize=None)
def base_packages():
    """Packages every Debian system has: Essential, or Priority required."""
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Essential} ${Priority}\n"],
                         capture_output=True, text=True, check=True).stdout
    return {w[0] for w in (l.split() for l in out.splitlines())
            if len(w) >= 2 and ("yes" in w[1:] or "required" in w[1:])}


def owners(paths):
    """{path: {package, ...}} from one `dpkg -S` over every path (architecture suffix dropped)."""
    out = subprocess.run(["dpkg", "-S", *paths], capture_output=True, text=True).stdout
    owned = {}
    for line in out.splitlines():
        if line.startswith("diversion ") or ": " not in line:
            continue
        pkgs, path = line.split(": ", 1)
        owned.setdefault(path, set()).update(p.strip().split(":")[0] for p in pkgs.split(","))
    return owned


def twins(path):
    """path, its realpath, and the /usr-merged twin of each (/bin/x <-> /usr/bin/x)."""
    out = []
    for p in (path, os.path.realpath(path)):
        out.append(p)
        for a, b in (("/usr/bin/", "/bin/"), ("/usr/sbin/", "/sbin/"), ("/usr/lib/", "/lib/")):
            if p.startswith(a):
                out.append(b + p[len(a):])
            elif p.startswith(b):
                out.append(a + p[len(b):])
    return list(dict.fromkeys(out))


@functools.lru_cache(maxsize=None)
def resolution():
    """{command: (path or None, {packages})} for every command found."""
    found = {}
    for name in commands():
        path = name if name.startswith("/") else shutil.which(name, path=SEARCH_PATH)
        found[name] = path if path and os.access(path, os.X_OK) else None
    owned = owners(sorted({t for p in found.values() if p for t in twins(p)}))
    return {n: (p, set().union(*(owned.get(t, set()) for t in twins(p))) if p else set())
            for n, p in found.items()}


def test_the_scan_finds_the_commands_it_must():
    """The scanners work: commands known to be run by each kind of source are found (a scan
    that found nothing would pass every check below)."""
    want = {"mkfs.ext4": "C argv", "/usr/bin/qemu-img": "C path", "nft": "C shell line",
            "ip": "Python sh()", "zstd": "Python subprocess", "dpkg-query": "this file",
            "ninja": "shell script", "python3": "sandbox cmd="}
    got = commands()
    missing = {k: v for k, v in want.items() if k not in got}
    assert not missing, f"not found by the scan: {missing}"
    # A shift is no heredoc: what follows it is still scanned.
    assert shell_commands("x=$(( 1 << 30 ))\nzstd -q f\n") == ["zstd"]
    assert shell_commands("cat <<'EOF'\nzstd -q f\nEOF\nls\n") == ["cat", "ls"]


@pytest.mark.parametrize("name", sorted(commands()))
def test_command_comes_from_a_package_deps_installs(name):
    path, pkgs = resolution()[name]
    where = ", ".join(commands()[name][:4])
    assert path, (f"`{name}` (run in {where}) is not installed on this machine: add the "
                  f"package that provides it to scripts/deps.sh (PKGS)")
    assert pkgs, (f"`{name}` (run in {where}) resolves to {path}, which no Debian package owns "
                  f"(`dpkg -S`): isola and its tests may only run commands deps.sh installs")
    allowed = deps_packages() | base_packages()
    assert pkgs & allowed, (f"`{name}` (run in {where}) is {path} from {sorted(pkgs)}, which "
                            f"scripts/deps.sh does not install: add it to PKGS")
