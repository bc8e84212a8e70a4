"""Fixtures of the node tests: a node network, and a three-server ZooKeeper ensemble on three of its nodes."""

from __future__ import annotations

from typing import Iterator

import pytest

from kinesis_spout.testing import netns
from kinesis_spout.testing.nodes import NodeNetwork
from kinesis_spout.testing.zk_ensemble import ZooKeeperEnsemble


@pytest.fixture
def ensemble_network() -> Iterator[NodeNetwork]:
    """A node network (namespaces; the test is skipped where they cannot be made) for the ensemble and the test's
    own nodes."""
    reason = netns.unavailable_reason()
    if reason is not None:
        pytest.skip(f"network namespaces cannot be made: {reason}")
    with NodeNetwork(require=True) as network:
        yield network


@pytest.fixture
def zookeeper_ensemble(ensemble_network: NodeNetwork) -> Iterator[ZooKeeperEnsemble]:
    """A started three-server ZooKeeper ensemble on nodes ``zk1``..``zk3`` of ``ensemble_network`` (a leader and
    two followers), closed after the test."""
    with ZooKeeperEnsemble.on_new_nodes(ensemble_network) as ensemble:
        yield ensemble
