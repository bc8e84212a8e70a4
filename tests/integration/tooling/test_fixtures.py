"""The shipped fixtures start real servers that behave as the rest of the suite relies on."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from kinesis_spout.errors import ServerStartError
from kinesis_spout.testing import KinesaliteServer, ZooKeeperServer
from kinesis_spout.testing.process import wait_until
from kinesis_spout.testing.zookeeper import four_letter


def test_zookeeper_serves_and_isolates_prefixes(zookeeper) -> None:
    client = zookeeper.client()
    client.ensure_path(zookeeper.prefix)
    client.create(f"{zookeeper.prefix}/node", b"hello")
    assert client.get(f"{zookeeper.prefix}/node")[0] == b"hello"
    assert zookeeper.prefix.startswith("/kinesis-spout-tests/test_zookeeper_serves")
    assert "Mode: standalone" in four_letter("127.0.0.1", zookeeper.server.port, "srvr")


def test_zookeeper_data_survives_kill_and_restart(zookeeper) -> None:
    client = zookeeper.client()
    client.create(f"{zookeeper.prefix}/kept", b"42", makepath=True)
    port = zookeeper.server.port
    zookeeper.server.kill()
    assert not zookeeper.server.running
    assert four_letter("127.0.0.1", port, "srvr") == ""
    zookeeper.server.start()
    assert zookeeper.server.port == port
    assert zookeeper.client().get(f"{zookeeper.prefix}/kept")[0] == b"42"


def test_a_server_restarted_from_a_helper_thread_outlives_that_thread(zookeeper) -> None:
    """Linux's parent-death signal follows the thread that forked a child: a ZooKeeper restarted from a thread that
    then ended used to be killed within a second. Servers are forked from one long-lived thread instead."""
    zookeeper.server.stop()
    helper = threading.Thread(target=zookeeper.server.start, name="restarter")
    helper.start()
    helper.join(30)
    assert zookeeper.server.running
    died = wait_until(lambda: not zookeeper.server.running, 3.0)
    assert not died, "ZooKeeper died after the thread that started it ended"
    assert "Mode: standalone" in four_letter("127.0.0.1", zookeeper.server.port, "srvr")


def test_moto_kinesis_is_reset_between_tests(moto_kinesis) -> None:
    client = moto_kinesis.client()
    assert client.list_streams()["StreamNames"] == []
    name = moto_kinesis.create_stream("fixture-moto", shards=2)
    placed = moto_kinesis.put(name, [b"a", b"b", b"c", b"d"])
    assert len(placed) == 4
    assert {shard for shard, _ in placed} <= set(moto_kinesis.shard_ids(name))
    assert not moto_kinesis.real_sequence_numbers


def test_kinesalite_has_real_sequence_numbers(kinesalite) -> None:
    name = kinesalite.create_stream(shards=1)
    placed = kinesalite.put(name, [b"x", b"y", b"z"])
    seqs = [int(seq) for _, seq in placed]
    assert all(len(seq) >= 50 for _, seq in placed), placed
    assert seqs == sorted(seqs) and seqs[1] - seqs[0] > 1  # sparse and increasing


def test_kinesis_local_serves_puts_and_reads(kinesis_local) -> None:
    name = kinesis_local.create_stream(shards=1)
    placed = kinesis_local.put(name, [b"one", b"two"])
    client = kinesis_local.client()
    shard = placed[0][0]
    it = client.get_shard_iterator(StreamName=name, ShardId=shard, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    data = [r["Data"] for r in client.get_records(ShardIterator=it)["Records"]]
    assert data == [b"one", b"two"]
    assert len(placed[0][1]) >= 50


@pytest.mark.parametrize("stream_shards", [3])
def test_kinesis_backend_runs_on_each_emulator(kinesis_backend, stream_shards: int) -> None:
    name = kinesis_backend.create_stream(shards=stream_shards)
    assert len(kinesis_backend.shard_ids(name)) == stream_shards


def test_missing_server_fails_fast_with_reason(tmp_path) -> None:
    with pytest.raises(ServerStartError, match="zookeeper is not installed|apt-get install -y zookeeper"):
        ZooKeeperServer(jar=tmp_path / "missing.jar").start()
    with pytest.raises(ServerStartError, match="kinesalite is not installed"):
        KinesaliteServer(node_modules=tmp_path).start()


def test_server_that_dies_reports_its_log_tail(tmp_path) -> None:
    bogus = tmp_path / "kinesalite"
    bogus.mkdir()
    (bogus / "cli.js").write_text("console.error('boom: cannot listen'); process.exit(3)\n")
    with pytest.raises(ServerStartError, match=r"exited with code 3[\s\S]*boom: cannot listen"):
        KinesaliteServer(node_modules=tmp_path, start_timeout_s=10).start()


def test_servers_die_with_a_killed_test_process(tmp_path) -> None:
    """A test run killed with SIGKILL leaves no orphan ZooKeeper or emulator behind."""
    import os
    import signal
    import subprocess
    import sys

    from kinesis_spout.testing.process import wait_until

    script = tmp_path / "holder.py"
    script.write_text(
        "import sys, time\n"
        "from kinesis_spout.testing import ZooKeeperServer, KinesaliteServer\n"
        "zk = ZooKeeperServer().start(); k = KinesaliteServer().start()\n"
        "print(zk._process.pid, k._process.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    holder = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        line = holder.stdout.readline() if holder.stdout else ""
        children = [int(pid) for pid in line.split()]
        assert len(children) == 2, line

        def alive(pid: int) -> bool:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return False
            with open(f"/proc/{pid}/stat") as stat:  # a zombie awaiting its reaper is dead too
                return stat.read().split(") ", 1)[1][0] != "Z"

        assert all(alive(pid) for pid in children)
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        assert wait_until(lambda: not any(alive(pid) for pid in children), 10)
    finally:
        if holder.poll() is None:
            holder.kill()


def test_emulators_are_looked_up_in_the_documented_order(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """$KINESIS_SPOUT_NODE_MODULES alone when set; else the source tree, then the user cache."""
    from kinesis_spout.testing import emulators

    source, cache, own = tmp_path / "src" / "node_modules", tmp_path / "cache", tmp_path / "own" / "node_modules"
    monkeypatch.setattr(emulators, "_SOURCE_TREE", source)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.delenv(emulators.NODE_MODULES_ENV, raising=False)
    user = cache / "kinesis-spout" / "emulators" / "node_modules"
    assert emulators.user_node_modules() == user
    assert [folder for _, folder in emulators.node_modules_candidates()] == [source, user]
    with pytest.raises(ServerStartError) as missing:
        emulators.find_package("kinesalite")
    assert str(source / "kinesalite") in str(missing.value) and str(user / "kinesalite") in str(missing.value)
    assert "kinesis-spout install-emulators" in str(missing.value)
    (user / "kinesalite").mkdir(parents=True)
    assert emulators.find_package("kinesalite") == user / "kinesalite"
    (source / "kinesalite").mkdir(parents=True)
    assert emulators.find_package("kinesalite") == source / "kinesalite"
    monkeypatch.setenv(emulators.NODE_MODULES_ENV, str(own))
    with pytest.raises(ServerStartError, match=r"\$KINESIS_SPOUT_NODE_MODULES"):  # set: no silent fallback
        emulators.find_package("kinesalite")
    (own / "kinesalite").mkdir(parents=True)
    assert emulators.find_package("kinesalite") == own / "kinesalite"


def test_zookeeper_jar_from_the_environment_with_its_dependencies_beside_it(tmp_path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A release's lib folder: a server jar whose manifest names no dependencies, the dependencies beside it."""
    import zipfile

    from kinesis_spout.testing.zookeeper import DEFAULT_JAR, JAR_ENV

    monkeypatch.setenv(JAR_ENV, str(tmp_path / "missing.jar"))
    with pytest.raises(ServerStartError, match=r"missing\.jar is missing.*KINESIS_SPOUT_ZOOKEEPER_JAR"):
        ZooKeeperServer().start()
    lib = tmp_path / "lib"
    lib.mkdir()
    with zipfile.ZipFile(DEFAULT_JAR) as debian:
        manifest = debian.read("META-INF/MANIFEST.MF").decode()
        with zipfile.ZipFile(lib / "zookeeper-3.8.jar", "w") as bare:
            for item in debian.infolist():
                if item.filename != "META-INF/MANIFEST.MF":
                    bare.writestr(item, debian.read(item))
            bare.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
    class_path = manifest.replace("\n ", "").split("Class-Path:", 1)[1].splitlines()[0].split()
    for dependency in map(Path, class_path):
        if dependency.exists():
            (lib / dependency.name).symlink_to(dependency)
    monkeypatch.setenv(JAR_ENV, str(lib / "zookeeper-3.8.jar"))
    with ZooKeeperServer() as server:
        assert server.jar == lib / "zookeeper-3.8.jar"
        assert "Mode: standalone" in four_letter("127.0.0.1", server.port, "srvr")


@pytest.mark.slow
def test_install_emulators_puts_them_where_the_fixtures_find_them(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`kinesis-spout install-emulators` (real npm) into the user cache; a server then starts with no setting."""
    from kinesis_spout.cli import main
    from kinesis_spout.testing import emulators

    monkeypatch.setattr(emulators, "_SOURCE_TREE", tmp_path / "no-source-tree")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(emulators.NODE_MODULES_ENV, raising=False)
    try:
        assert main(["install-emulators"]) == 0
    except ServerStartError as exc:
        if any(code in str(exc) for code in ("ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "ECONNREFUSED")):
            pytest.skip(f"the npm registry is not reachable: {exc}")
        raise
    installed = tmp_path / "cache" / "kinesis-spout" / "emulators" / "node_modules" / "kinesalite"
    assert emulators.find_package("kinesalite") == installed
    with KinesaliteServer() as server:
        assert server.running and str(installed) in " ".join(server.argv)


def test_an_emulator_that_died_is_started_again_on_its_port_and_reported(kinesalite_server) -> None:
    """One crash of the session's kinesalite must fail the test it happened in, not every test after it: the next
    test's fixture starts it again on the same port, with a warning that carries the exit code and the log tail."""
    import signal

    from kinesis_spout.testing.emulators import http_answers
    from kinesis_spout.testing.plugin import _alive

    url = kinesalite_server.endpoint_url
    os.kill(kinesalite_server.pid, signal.SIGKILL)  # as a crash would: not through the fixture's stop
    assert wait_until(lambda: not kinesalite_server.running, 10) and not http_answers(url)
    with pytest.warns(RuntimeWarning, match=r"kinesalite died during the test session \(exit code -9\); started "
                                            r"again on port \d+"):
        assert _alive(kinesalite_server) is kinesalite_server
    assert kinesalite_server.endpoint_url == url and http_answers(url)


def test_a_client_killed_mid_request_does_not_end_kinesalite() -> None:
    """kinesalite rethrows the error of a request whose client went away while sending its body, which ends the
    server; the SIGKILL tests make such clients on purpose. The fixture's guard keeps the server up."""
    import socket
    import struct

    from kinesis_spout.testing.emulators import http_answers

    with KinesaliteServer() as server:
        for _ in range(3):
            sock = socket.create_connection(("127.0.0.1", server.port))
            sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-amz-json-1.1\r\n"
                         b"X-Amz-Target: Kinesis_20131202.ListStreams\r\nContent-Length: 1000\r\n\r\n{\"Li")
            time.sleep(0.1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
            sock.close()
        assert wait_until(lambda: server.log_tail().count("a client went away mid-request") == 3
                          or not server.running, 10), server.log_tail()
        assert server.running, server.log_tail()
        assert http_answers(server.endpoint_url)
