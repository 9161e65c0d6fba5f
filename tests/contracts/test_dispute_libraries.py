"""Bisection and Committee, the dispute game's pure libraries, through a harness; the
Python planner and vote commitment agree with them."""

import pytest
from brownie import accounts

from tests.contracts.dispute_setup import *  # noqa: F401,F403
from truetrain.dispute import vote_commitment


@pytest.fixture(scope="module")
def lib(DisputeLibHarness, deployer):
    return DisputeLibHarness.deploy({"from": deployer})


@pytest.mark.parametrize("leaves, depth", [(1, 0), (2, 1), (3, 2), (7, 3), (8, 3), (9, 4), (64, 6), (1_024, 10), (1_025, 11), (65_535, 16)])
def test_depth_isCeilLog2(lib, leaves, depth):
    assert lib.depth(leaves) == depth == (leaves - 1).bit_length()


def test_halving_fromAnyIntervalReachesLengthOne_inCeilLog2Steps(lib):
    for leaves in (2, 3, 7, 8, 33, 1_024):
        for target in {0, 1, leaves // 2, leaves - 1}:
            lo, hi, steps = 0, leaves, 0
            while lib.isOpen(lo, hi):
                mid = lib.midpoint(lo, hi)
                assert lo < mid < hi
                lo, hi = lib.narrow(lo, hi, mid, mid <= target)
                steps += 1
            assert (lo, hi) == (target, target + 1) and steps <= lib.depth(leaves)


def test_committee_rules(lib):
    assert [lib.valid(v) for v in range(5)] == [False, True, True, True, False]
    assert lib.workerWins(2, 3) and not lib.workerWins(1, 2) and not lib.workerWins(0, 1) and lib.workerWins(1, 1)
    assert lib.withOutcome(1, True) and not lib.withOutcome(2, True) and not lib.withOutcome(3, True)
    assert not lib.withOutcome(1, False) and lib.withOutcome(2, False) and lib.withOutcome(3, False)
    assert [lib.oddSize(n) for n in range(6)] == [0, 1, 1, 3, 3, 5]


def test_voteCommitment_matchesPython(lib):
    salt = bytes.fromhex("5a" * 32)
    assert lib.commitment(7, 2, salt, accounts[3]) == "0x" + vote_commitment(7, 2, salt, accounts[3].address).hex()
