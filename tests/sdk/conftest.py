# SPDX-License-Identifier: Apache-2.0
"""tests/sdk: the Python SDK (sdk/python) against a real isolad (fixtures in tests/conftest.py)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sdk" / "python"))

import isola  # noqa: E402


@pytest.fixture
def client(isolad):
    """An SDK client on isolad's unix socket; every wait is bounded by 30 s."""
    return isola.Client(socket_path=isolad.socket, timeout=30)


@pytest.fixture
def sb(client, isolad):
    """A sandbox made through the SDK, destroyed after the test."""
    s = client.create_sandbox(labels={"suite": "sdk"})
    yield s
    if isolad.alive():
        try:
            s.delete()
        except isola.NotFoundError:
            pass
