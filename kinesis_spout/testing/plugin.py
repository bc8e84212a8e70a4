"""pytest fixtures with real servers, registered as the ``kinesis_spout`` pytest plugin.

Servers start once per test session on free loopback ports and stop at the end (their children die with the
test process even when it is killed). Each test gets isolated state: a fresh ZooKeeper prefix, a reset moto,
uniquely named streams on the emulators.

=================  ========  ============================================================================
fixture            scope     what it gives
=================  ========  ============================================================================
zookeeper_server   session   :class:`ZooKeeperServer` (``hosts``, ``stop()``, ``kill()``, ``start()``)
zookeeper          function  :class:`ZooKeeperHandle`: ``hosts``, a unique ``prefix``, ``client()``
moto_kinesis       function  :class:`KinesisEndpoint` on moto's server, state reset before the test
kinesalite         function  :class:`KinesisEndpoint` on kinesalite (real sequence numbers)
kinesis_local      function  :class:`KinesisEndpoint` on kinesis-local (kinesis-mock)
kinesis_backend    function  parametrized over moto and kinesalite: write a test once, run it on both
fault_proxy        function  ``(FaultProxy, KinesisEndpoint)``: the backend behind a fault-injecting proxy
spark              session   a ``local[2]`` SparkSession (pyspark imported only when a test asks for it)
redis              session   :class:`RedisServer` (``url``, ``kill()``, ``start()``): state backend tests
memcached          session   :class:`MemcachedServer` (``server`` = ``host:port``): state backend tests
=================  ========  ============================================================================
"""

from __future__ import annotations

import logging
import os
import re
import uuid
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterator

import pytest

from kinesis_spout.testing.emulators import KinesaliteServer, KinesisLocalServer
from kinesis_spout.testing.faults import fault_proxy  # noqa: F401 - a fixture of this plugin
from kinesis_spout.testing.kinesis import KinesisEndpoint
from kinesis_spout.testing.memcached import MemcachedServer
from kinesis_spout.testing.moto_server import MotoKinesisServer
from kinesis_spout.testing.redis import RedisServer
from kinesis_spout.testing.spark import local_spark_session
from kinesis_spout.testing.zookeeper import ZooKeeperServer

KINESIS_BACKENDS = ("moto_kinesis", "kinesalite")
log = logging.getLogger(__name__)


def _use_dummy_aws_credentials() -> None:
    """Let clients built by code under test (default credential chain) talk to local servers."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


@dataclass
class ZooKeeperHandle:
    """A test's view of the shared ZooKeeper: ``hosts`` and a ``prefix`` no other test uses."""

    server: ZooKeeperServer
    prefix: str
    _clients: list[Any] = field(default_factory=list, repr=False)
    _reader: Any = field(default=None, repr=False)

    @property
    def hosts(self) -> str:
        return self.server.hosts

    def client(self) -> Any:
        """A started kazoo client (closed after the test): it reconnects after a server restart, and its
        commands retry a bounded number of times."""
        from kazoo.client import KazooClient
        from kazoo.retry import KazooRetry

        client = KazooClient(hosts=self.hosts, timeout=10.0,
                             connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
                             command_retry=KazooRetry(max_tries=20, delay=0.1, max_delay=1.0))
        client.start(timeout=15)
        self._clients.append(client)
        return client

    def reader(self) -> Any:
        """This test's one shared kazoo client (:meth:`client` on first use, the same one afterwards; closed after
        the test): for looking at what the code under test wrote from polling loops, without opening a ZooKeeper
        session per look (a server takes a bounded number of connections from one address: 200 for the test
        server, 60 by default)."""
        if self._reader is None:
            self._reader = self.client()
        return self._reader

    def close(self) -> None:
        self._reader = None
        for client in self._clients:
            try:
                client.stop()
                client.close()
            except Exception:  # noqa: BLE001 - best effort at teardown; the server may have been stopped
                pass
        self._clients.clear()


def _running(server: Any) -> Iterator[Any]:
    """Start a server for a session fixture; close it at the end, also when the run is interrupted."""
    try:
        server.start()
        yield server
    finally:
        server.close()


def _alive(server: Any) -> Any:
    """The session's emulator, started again on its port if it died since the last test (its streams are gone:
    tests make their own). The death is reported as a warning with the exit code and the log tail, so one crash of
    an emulator fails the test it happened in, not every test after it."""
    if not server.running:
        process = getattr(server, "_process", None)
        code = process.exit_code() if process is not None else None
        tail = server.log_tail()
        warnings.warn(f"{server.name} died during the test session (exit code {code}); started again on port "
                      f"{server.port}. Its log ended with:\n{tail}", RuntimeWarning, stacklevel=2)
        log.warning("%s died (exit code %s); starting it again. Log tail:\n%s", server.name, code, tail)
        server.start()
    return server


def _test_slug(request: pytest.FixtureRequest) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name)[:60] + "-" + uuid.uuid4().hex[:8]


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[ZooKeeperServer]:
    """A real ZooKeeper server for the whole test session."""
    yield from _running(ZooKeeperServer())


@pytest.fixture
def zookeeper(zookeeper_server: ZooKeeperServer, request: pytest.FixtureRequest) -> Iterator[ZooKeeperHandle]:
    """The shared ZooKeeper (restarted if an earlier test left it stopped) and a prefix of this test's own."""
    zookeeper_server.start()
    handle = ZooKeeperHandle(zookeeper_server, f"/kinesis-spout-tests/{_test_slug(request)}")
    try:
        yield handle
    finally:
        handle.close()
        zookeeper_server.start()


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoKinesisServer]:
    yield from _running(MotoKinesisServer())


@pytest.fixture
def moto_kinesis(moto_server: MotoKinesisServer) -> KinesisEndpoint:
    """moto's Kinesis server, reset before the test."""
    _use_dummy_aws_credentials()
    moto_server.reset()
    return KinesisEndpoint("moto", moto_server.endpoint_url, real_sequence_numbers=False)


@pytest.fixture(scope="session")
def kinesalite_server() -> Iterator[KinesaliteServer]:
    yield from _running(KinesaliteServer())


@pytest.fixture
def kinesalite(kinesalite_server: KinesaliteServer) -> KinesisEndpoint:
    """kinesalite, with real sequence numbers. Streams persist across tests: use unique names."""
    _use_dummy_aws_credentials()
    return KinesisEndpoint("kinesalite", _alive(kinesalite_server).endpoint_url)


@pytest.fixture(scope="session")
def kinesis_local_server() -> Iterator[KinesisLocalServer]:
    yield from _running(KinesisLocalServer())


@pytest.fixture
def kinesis_local(kinesis_local_server: KinesisLocalServer) -> KinesisEndpoint:
    """kinesis-local (kinesis-mock), the most faithful emulator. Streams persist across tests: use unique names."""
    _use_dummy_aws_credentials()
    return KinesisEndpoint("kinesis-local", _alive(kinesis_local_server).endpoint_url)


@pytest.fixture(params=KINESIS_BACKENDS)
def kinesis_backend(request: pytest.FixtureRequest) -> KinesisEndpoint:
    """Each test using it runs once on moto and once on kinesalite."""
    endpoint: KinesisEndpoint = request.getfixturevalue(request.param)
    return endpoint


@pytest.fixture(scope="session")
def redis() -> Iterator[RedisServer]:
    """A private Redis server for the whole test session (no persistence). Tests use namespaces of their own."""
    yield from _running(RedisServer())


@pytest.fixture(scope="session")
def memcached() -> Iterator[MemcachedServer]:
    """A private memcached server for the whole test session. Tests use namespaces of their own."""
    yield from _running(MemcachedServer())


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A ``local[2]`` SparkSession, session-scoped: started by the first test that asks for it, shared by every
    later test of the run (of the pytest-xdist worker), stopped at the end.

    The start is the slow part: the JVM takes about 5 s on an idle 2-core machine and up to ~30 s on a busy one,
    and the first job some seconds more (its Python workers start); later tests pay nothing. So mark tests that use
    it ``slow`` or run them apart (``-m spark``), and do not stop it in a test (``spark.stop()`` would leave the
    later tests a stopped session). Tables and views a test registers stay for the later ones: give them names of
    the test's own. Quiet and small: see :func:`local_spark_session`.

        def test_counts(spark):
            assert spark.range(3).count() == 3

    Its Python workers inherit the environment of the moment the JVM starts, which may come before any Kinesis
    fixture ran: the dummy credentials those fixtures set for the local servers are set here first (never over
    credentials already in the environment)."""
    for name, value in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ.setdefault(name, value)
    session = local_spark_session()
    try:
        yield session
    finally:
        session.stop()
