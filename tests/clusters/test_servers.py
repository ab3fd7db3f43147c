"""`tests.clusters.servers.running`: a server is waited for on its own port, and only its own listener counts."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from tests.clusters.servers import free_port, running


def test_a_port_another_process_listens_on_fails_the_wait_at_once(tmp_path: Path):
    """Another program took the port before the server bound it: the wait fails naming the port, instead of
    taking that listener for the server (a Spark master moves to the next port, and its clients hang)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
        held = pytest.raises(pytest.fail.Exception, match=f"port {port} is held by another process")
        with held, running(sleeper, port, tmp_path / "log", timeout=30):
            pass


def test_the_servers_own_listener_ends_the_wait(tmp_path: Path):
    port = free_port()
    listen = f"import socket, time; s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(); time.sleep(60)"
    with running([sys.executable, "-c", listen], port, tmp_path / "log", timeout=30) as process:
        assert process.poll() is None
