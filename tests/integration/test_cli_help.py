# SPDX-License-Identifier: Apache-2.0
"""The CLI's self-description, all rendered from its one command table: `--help` of every command
and subcommand, `isola help CMD`, man pages (built by meson and `isola --man`), shell completion
(sourced in bash and asked), global options anywhere, JSON errors, and docs/cli.md naming every
command and option the help lists."""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tenancy_util import ROOT_CONFTEST

CLI = ROOT_CONFTEST.CLI

ROOT = Path(__file__).resolve().parents[2]


def run(*args, env=None, input=None):
    e = dict(os.environ)
    e.pop("ISOLA_URL", None)
    e.update(env or {})
    return subprocess.run([str(CLI), *args], capture_output=True, timeout=60, env=e,
                          input=input)


def commands():
    """(command, is_group) from `isola help`'s command list."""
    out = run("help").stdout.decode()
    body = out.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
    cmds = []
    for ln in body.splitlines():
        name, usage = ln.split()[0], ln.split()[1] if len(ln.split()) > 1 else ""
        cmds.append((name, usage == "SUBCOMMAND"))
    return cmds


def subcommands(group):
    out = run(group, "--help").stdout.decode()
    return [ln.split()[1] for ln in out.split("Subcommands:\n", 1)[1].splitlines()
            if ln.startswith(f"  {group} ")]


def every_command():
    """Every leaf command as a tuple of words: ("exec",), ("fs", "ls"), ..."""
    out = []
    for name, group in commands():
        out += [(name, s) for s in subcommands(name)] if group else [(name,)]
    return out


def options_of(help_text):
    return set(re.findall(r"^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)", help_text.split(
        "Options:\n", 1)[1].split("\n\n", 1)[0], re.M))


def test_every_command_has_help_with_options_and_example():
    cmds = every_command()
    assert len(cmds) > 50, cmds
    for words in cmds:
        for form in ([*words, "--help"], [*words, "-h"], ["help", *words]):
            cp = run(*form)
            out = cp.stdout.decode()
            assert cp.returncode == 0, (form, cp)
            assert out.startswith(f"usage: isola {' '.join(words)}"), (form, out)
            assert "\nOptions:\n" in out and "--help" in out, (form, out)
            assert re.search(r"\nExample:\n  .*\bisola \S", out), (form, out)
            # Each option row has a one-line description.
            for ln in out.split("Options:\n", 1)[1].split("\n\n", 1)[0].splitlines():
                assert re.match(r"  (-\w, )?\s*--[a-z-]+( \S+)?\s{2,}\S", ln), (form, ln)


def test_version_help_and_unknown_help():
    assert run("version", "--help").returncode == 0
    cp = run("help", "no-such")
    assert cp.returncode == 2 and b"no-such" in cp.stderr, cp


def test_help_shows_options_the_parser_accepts():
    """An option listed by --help is accepted by the parser (it may fail later, but never as
    an unknown option)."""
    for words in [("run",), ("create",), ("exec",), ("ls",), ("fs", "ls"), ("stats",)]:
        for opt in options_of(run(*words, "--help").stdout.decode()):
            cp = run("--socket", "/nonexistent/isola.sock", *words, opt, "1")
            assert b"unknown option" not in cp.stderr, (words, opt, cp.stderr)


def test_docs_cli_md_lists_every_command_and_option():
    doc = (ROOT / "docs" / "cli.md").read_text()
    missing = []
    for words in every_command():
        cmd = " ".join(words)
        if not re.search(rf"isola {re.escape(cmd)}\b", doc):
            missing.append(f"command `isola {cmd}`")
            continue
        for opt in options_of(run(*words, "--help").stdout.decode()) - {"--help"}:
            if not re.search(rf"`{re.escape(opt)}\b", doc):
                missing.append(f"option {opt} of `isola {cmd}`")
    for opt in ("--json", "--quiet", "--socket", "--url", "--token"):
        if f"`{opt}" not in doc:
            missing.append(f"global option {opt}")
    assert not missing, "docs/cli.md does not document: " + ", ".join(missing)


def test_man_pages_built_for_every_command():
    build = CLI.parent
    for name, _ in commands():
        page = build / f"isola-{name}.1"
        assert page.is_file(), f"{page} not built (src/cli/meson.build cli_man_pages)"
        assert page.read_bytes() == run("--man", name).stdout, page
    cp = subprocess.run(["man", "-l", str(build / "isola-exec.1")], capture_output=True,
                        timeout=60, env=dict(os.environ, MANPAGER="cat", MANWIDTH="100"))
    text = cp.stdout.decode()
    assert cp.returncode == 0 and "isola-exec - run a command in a sandbox" in text, cp
    assert "--workdir" in text.replace("‐", "-") and "Example:" in text, text
    top = subprocess.run(["man", "-l", str(build / "isola.1")], capture_output=True, timeout=60,
                         env=dict(os.environ, MANPAGER="cat")).stdout.decode()
    assert "isola-stats" in top.replace("‐", "-") and "EXIT STATUS" in top, top
    assert run("--man", "no-such").returncode == 2


def complete(words, env=None):
    """Asks the bash completion for words (the last one being completed)."""
    script = ("source <(isola completion bash)\n"
              f"COMP_WORDS=({' '.join(repr(w) if w else chr(39) * 2 for w in words)})\n"
              f"COMP_CWORD={len(words) - 1}\n_isola\necho \"${{COMPREPLY[@]}}\"\n")
    e = dict(os.environ, PATH=f"{CLI.parent}:{os.environ['PATH']}")
    e.update(env or {})
    cp = subprocess.run(["bash", "-c", script], capture_output=True, timeout=60, env=e)
    assert cp.returncode == 0, cp
    return cp.stdout.decode().split()


def test_bash_completion_commands_and_options():
    assert complete(["isola", "ex"]) == ["exec", "expose"]
    assert complete(["isola", "exec", "--wo"]) == ["--workdir"]
    assert "--json" in complete(["isola", "ls", "--j"])
    assert complete(["isola", "fs", "mk"]) == ["mkdir"]
    assert complete(["isola", "fs", "ls", "--de"]) == ["--depth"]
    assert complete(["isola", "run", "--tier", "mi"]) == ["microvm"]
    assert complete(["isola", "completion", "--he"]) == ["--help"]


def test_bash_completion_names_from_the_daemon(isolad, make_sandbox, api):
    sb = make_sandbox()
    env = {"ISOLA_SOCKET": isolad.socket}
    assert sb["id"] in complete(["isola", "exec", ""], env)
    assert sb["id"] in complete(["isola", "inspect", sb["id"][:5]], env)
    tmpl = [t["name"] for t in api.get_json("/v1/templates")["templates"]]
    assert tmpl and set(tmpl) <= set(complete(["isola", "run", "--template", ""], env))
    assert set(tmpl) <= set(complete(["isola", "template", "rm", ""], env))


def test_zsh_and_fish_scripts():
    z = run("completion", "zsh").stdout.decode()
    assert "bashcompinit" in z and "complete -F _isola isola" in z
    subprocess.run(["bash", "-n"], input=z.encode(), check=True)
    f = run("completion", "fish").stdout.decode()
    assert "complete -c isola -n __fish_use_subcommand -a exec" in f
    assert "-l workdir -s w -r" in f and "isola __complete sandboxes" in f
    # fish single quotes: an apostrophe in a description ("sandbox's") must be escaped.
    for ln in f.splitlines():
        assert ln.replace("\\'", "").count("'") % 2 == 0, ln
    cp = run("completion", "tcsh")
    assert cp.returncode == 2 and b"tcsh" in cp.stderr


def test_global_options_anywhere(isolad):
    s = isolad.socket
    for argv in (["ls", "--json", "--socket", s], ["--socket", s, "doctor", "--json"],
                 ["version", "--json"], ["ls", "-q", "--socket", s]):
        cp = run(*argv)
        assert cp.returncode == 0, (argv, cp)
        if "--json" in argv:
            json.loads(cp.stdout)
    cp = run("create", "--socket", s, "--json", "--ttl", "60")
    assert cp.returncode == 0, cp
    sid = json.loads(cp.stdout)["id"]
    assert run("rm", sid, "--socket", s).returncode == 0


def test_json_errors_on_stderr(isolad):
    cp = run("ls", "--bogus", "--json")
    assert cp.returncode == 2 and cp.stdout == b"", cp
    e = json.loads(cp.stderr)
    assert e == {"code": "usage", "message": "unknown option `--bogus`"}, e
    cp = run("--socket", isolad.socket, "inspect", "nosuchsandbox0000", "--json")
    assert cp.returncode == 1, cp
    e = json.loads(cp.stderr)
    assert e["code"] == "not_found" and "nosuchsandbox0000" in e["message"], e
    cp = run("--socket", "/nonexistent/x.sock", "--json", "ls")
    assert cp.returncode == 1 and json.loads(cp.stderr)["code"] == "unavailable", cp
    # Without --json the same errors are one plain line.
    cp = run("--socket", isolad.socket, "inspect", "nosuchsandbox0000")
    assert cp.stderr.startswith(b"isola: ") and b"{" not in cp.stderr, cp
