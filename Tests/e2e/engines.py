"""The three storage engines for the tests that run on every one (test_conditional_*.py,
test_history_reads.py, test_store_deletion.py): `Engine` starts gateways on the memory engine, the
disk engine (a fresh data directory each) or the redis engine, and the `engine` and `port`
fixtures run a test once on each. A module that uses them imports the `redis` fixture too: `engine`
asks for it by name.
"""

from __future__ import annotations

import itertools

import pytest

from test_cluster import start_node

ENGINES = ["memory", "disk", "redis"]


# ---- Engines -------------------------------------------------------------

class Engine:
    """Starts gateways on one engine: memory, disk (a fresh data directory each) or redis."""

    def __init__(self, name: str, start_server, tmp_path, redis_server=None):
        self.name = name
        self.start_server = start_server
        self.tmp_path = tmp_path
        self.redis = redis_server
        self.data_dirs = itertools.count()

    def start(self, *args):
        if self.name == "disk":
            directory = self.tmp_path / f"data-{next(self.data_dirs)}"
            return self.start_server("--data-dir", directory, *args)
        if self.name == "redis":
            return start_node(self.start_server, self.redis, *args)
        return self.start_server(*args)


@pytest.fixture(params=ENGINES)
def engine(request, start_server, tmp_path) -> Engine:
    redis_server = request.getfixturevalue("redis") if request.param == "redis" else None
    return Engine(request.param, start_server, tmp_path, redis_server)


@pytest.fixture
def port(engine) -> int:
    return engine.start().port
