# SPDX-License-Identifier: Apache-2.0
"""The CLI's read commands (one GET, then --json or a human view): operand errors, the
not-found path and what --json prints; and the command groups' dispatch. Pinned so the shared
code behind them stays the same."""

import json

import pytest

ID_READS = [("inspect",), ("ps",), ("ports",)]
NO_OPERAND_READS = [("snapshot", "ls"), ("pool", "ls"), ("template", "ls"), ("doctor",),
                    ("tenant", "ls"), ("compliance", "report")]


@pytest.mark.parametrize("argv", ID_READS, ids=lambda a: " ".join(a))
def test_id_reads_want_one_id(cli, argv):
    cp = cli(*argv)
    assert cp.returncode == 2 and b"isola: missing sandbox ID" in cp.stderr, cp
    cp = cli(*argv, "a", "b")
    assert cp.returncode == 2 and b"isola: too many arguments" in cp.stderr, cp
    cp = cli(*argv, "-x", "a")
    assert cp.returncode == 2 and b"usage: isola" in cp.stderr, cp
    cp = cli(*argv, "-h")
    assert cp.returncode == 0 and cp.stdout, cp
    assert cli(*argv, "--help").stdout == cp.stdout


def test_wrong_long_option_is_named(cli):
    """Commands without long options of their own still take --help and name a wrong one."""
    for argv in ID_READS + NO_OPERAND_READS + [("pause",), ("network", "get")]:
        cp = cli(*argv, "--frob")
        assert cp.returncode == 2 and b"unknown option `--frob`" in cp.stderr, cp
        cp = cli(*argv, "--help")
        assert cp.returncode == 0 and b"usage: isola" in cp.stdout, cp


@pytest.mark.parametrize("argv", ID_READS, ids=lambda a: " ".join(a))
def test_id_reads_of_a_missing_sandbox_fail(cli, argv):
    cp = cli(*argv, "nosuchsandbox")
    assert cp.returncode == 1 and b"nosuchsandbox" in cp.stderr and not cp.stdout, cp


@pytest.mark.parametrize("argv", NO_OPERAND_READS, ids=lambda a: " ".join(a))
def test_no_operand_reads_refuse_operands(cli, argv):
    cp = cli(*argv, "extra")
    assert cp.returncode == 2 and b"isola: unexpected argument `extra`" in cp.stderr, cp
    cp = cli(*argv, "-h")
    assert cp.returncode == 0 and cp.stdout, cp
    assert cli(*argv, "--help").stdout == cp.stdout


def test_json_of_the_reads(cli, api, sandbox):
    """--json prints the list where the command always did (snapshots, processes, templates,
    tenants), else the whole reply. (ports needs an exposing isolad: test_expose.py.)"""
    sid = sandbox["id"]

    def j(*argv):
        cp = cli(*argv, json=True)
        assert cp.returncode == 0, cp
        return json.loads(cp.stdout)
    assert j("inspect", sid)["id"] == sid
    assert isinstance(j("ps", sid), list)
    assert isinstance(j("snapshot", "ls"), list)
    assert isinstance(j("pool", "ls")["pools"], list)
    assert any(t["name"] == "host" for t in j("template", "ls"))
    assert isinstance(j("tenant", "ls"), list)
    assert isinstance(j("doctor"), dict)
    assert isinstance(j("compliance", "report"), dict)
    human = cli("ps", sid)
    assert human.returncode == 0 and human.stdout.startswith(b"PID"), human


GROUPS = {"fs": "ls", "network": "get", "snapshot": "ls", "pool": "ls", "template": "ls",
          "token": "ls", "tenant": "ls", "audit": "verify", "compliance": "report"}


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_group_dispatch(cli, group):
    """`isola GROUP -h` lists the subcommands on stdout; no or an unknown subcommand is a usage
    error that names it and lists them on stderr."""
    sub = GROUPS[group]
    for h in ("-h", "--help"):
        cp = cli(group, h)
        assert cp.returncode == 0 and f"{group} {sub}".encode() in cp.stdout, cp
    cp = cli(group)
    assert cp.returncode == 2 and b"isola: missing command" in cp.stderr, cp
    assert f"{group} {sub}".encode() in cp.stderr, cp
    cp = cli(group, "frob")
    assert cp.returncode == 2 and f"unknown command `{group} frob`".encode() in cp.stderr, cp
    assert f"{group} {sub}".encode() in cp.stderr, cp
