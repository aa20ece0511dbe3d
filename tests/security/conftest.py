# SPDX-License-Identifier: Apache-2.0
"""Fixtures for tests/security (helpers in seclib.py): extra isolads with test hooks and
host canaries."""

import pytest

import seclib


@pytest.fixture
def extra_isolad():
    """Factory: extra_isolad(extra_env=..., extra_args=..., tty=...) -> a running isolad,
    shut down (and judged: clean SIGTERM exit, no sanitizer report, no mount left) after
    the test."""
    made = []

    def make(**kw):
        d = seclib.ExtraIsolad(**kw)
        made.append(d)
        return d

    yield make
    problems = []
    for d in made:
        problems += d.shutdown()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


@pytest.fixture
def canary():
    """A host directory + secret file watched with inotify (seclib.Canary)."""
    c = seclib.Canary()
    yield c
    c.close()
