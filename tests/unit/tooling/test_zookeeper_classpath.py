"""The class path every ZooKeeper server the library starts runs on (one server, or each of an ensemble's): Debian's
jar names its dependencies in its manifest, Apache's release jar does not and has them beside it. No server."""

from __future__ import annotations

import zipfile
from pathlib import Path

from kinesis_spout.testing.zookeeper import server_classpath


def jar(path: Path, manifest: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("META-INF/MANIFEST.MF", manifest)
    return path


def test_a_release_jar_runs_with_the_jars_beside_it(tmp_path: Path) -> None:
    release = jar(tmp_path / "lib" / "zookeeper-3.8.4.jar", "Manifest-Version: 1.0\n")
    assert server_classpath(release) == f"{release}:{tmp_path / 'lib' / '*'}"


def test_debian_s_jar_runs_with_what_its_manifest_names_and_the_slf4j_binding_and_netty_for_tls(
        tmp_path: Path) -> None:
    debian = jar(tmp_path / "zookeeper.jar", "Manifest-Version: 1.0\nClass-Path: jline.jar netty-handler.jar\n")
    assert server_classpath(debian) == str(debian), "no binding installed: none named"
    for name in ("slf4j-simple.jar", "netty-codec.jar", "netty-resolver.jar"):
        (tmp_path / name).write_bytes(b"")
    assert server_classpath(debian) == f"{debian}:{tmp_path / 'slf4j-simple.jar'}"
    assert server_classpath(debian, tls=True) == ":".join(
        str(p) for p in (debian, tmp_path / "slf4j-simple.jar", tmp_path / "netty-codec.jar",
                         tmp_path / "netty-resolver.jar"))
