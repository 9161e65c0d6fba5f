"""IdentityRegistry: registration and validation, profile/roles/liveness updates, the
recorder-only history and reputation writes, and the reputation formula's bounds."""

from __future__ import annotations

import random

import brownie
import pytest
from brownie import ZERO_ADDRESS

from tests.contracts.conftest import PROFILE_CID, PROFILE_HASH, RECORDER_ROLE, WORKER_CAPABILITY
from tests.contracts.helpers import lo

WORKER, VERIFIER, SUBMITTER = 1, 2, 4
NO_CAPABILITY = (0, 0, 0, 0, 0)
OTHER_HASH = "0x" + "cd" * 32
RECORDER = bytes.fromhex(RECORDER_ROLE[2:])


def register_worker(registry, account, roles=WORKER):
    return registry.register(roles, PROFILE_CID, PROFILE_HASH, WORKER_CAPABILITY, {"from": account})


# Python model of the reputation formula documented in IIdentityRegistry.
def completed(rep):
    return rep + (10_000 - rep) // 20


def failed(rep):
    return rep - rep // 4


def timed_out(rep):
    return rep - rep // 10


def dispute_won(rep):
    return rep + (10_000 - rep) // 10


def dispute_lost(rep):
    return rep - rep // 2


# ------------------------------------------------------------------ registration


def test_register_worker_storesIdentity_andEmits(registry, alice):
    tx = register_worker(registry, alice, WORKER | VERIFIER)
    event = tx.events["IdentityRegistered"]
    assert event["account"] == alice
    assert event["roles"] == WORKER | VERIFIER
    assert event["profileCid"] == PROFILE_CID
    assert event["profileHash"] == PROFILE_HASH
    assert tuple(event["capability"]) == WORKER_CAPABILITY
    ident = registry.identityOf(alice)
    registered, roles, reputation, registered_at, last_seen, profile_hash, cid, capability, history = ident
    assert registered is True
    assert roles == WORKER | VERIFIER
    assert reputation == 5_000 == registry.INITIAL_REPUTATION()
    assert registered_at == last_seen == tx.block_number
    assert profile_hash == PROFILE_HASH
    assert cid == PROFILE_CID
    assert tuple(capability) == WORKER_CAPABILITY
    assert tuple(history) == (0,) * 7
    assert registry.isRegistered(alice)
    assert registry.reputationOf(alice) == 5_000
    assert registry.lastSeenBlock(alice) == tx.block_number
    assert tuple(registry.capabilityOf(alice)) == WORKER_CAPABILITY


def test_register_submitter_withoutCapability_succeeds(registry, alice):
    registry.register(SUBMITTER, PROFILE_CID, PROFILE_HASH, NO_CAPABILITY, {"from": alice})
    assert registry.hasParticipantRole(alice, SUBMITTER)
    assert not registry.hasParticipantRole(alice, WORKER)


def test_register_twice_reverts(registry, alice):
    register_worker(registry, alice)
    with brownie.reverts(f"IdentityAlreadyRegistered: {lo(alice)}"):
        register_worker(registry, alice)


@pytest.mark.parametrize("roles", [0, 8, 255])
def test_register_invalidRoles_reverts(registry, alice, roles):
    with brownie.reverts(f"IdentityInvalidRoles: {roles}"):
        registry.register(roles, PROFILE_CID, PROFILE_HASH, WORKER_CAPABILITY, {"from": alice})


@pytest.mark.parametrize("cid", ["", "b" * 129])
def test_register_invalidProfileCid_reverts(registry, alice, cid):
    with brownie.reverts(f"IdentityInvalidProfileCid: {len(cid)}"):
        registry.register(WORKER, cid, PROFILE_HASH, WORKER_CAPABILITY, {"from": alice})


def test_register_longestProfileCid_succeeds(registry, alice):
    registry.register(WORKER, "b" * 128, PROFILE_HASH, WORKER_CAPABILITY, {"from": alice})
    assert registry.identityOf(alice)[6] == "b" * 128


def test_register_zeroProfileHash_reverts(registry, alice):
    with brownie.reverts("IdentityZeroProfileHash: "):
        registry.register(WORKER, PROFILE_CID, "0x" + "00" * 32, WORKER_CAPABILITY, {"from": alice})


@pytest.mark.parametrize("capability", [(1, 0, 10, 0, 1), (1, 1024, 10, 0, 0)])
def test_register_workerInvalidCapability_reverts(registry, alice, capability):
    with brownie.reverts(f"IdentityInvalidCapability: {capability[1]}, {capability[4]}"):
        registry.register(WORKER, PROFILE_CID, PROFILE_HASH, capability, {"from": alice})


def test_identity_hasNoTransferFunction(registry):
    names = {item.get("name", "") for item in registry.abi if item["type"] == "function"}
    assert not any("transfer" in name.lower() for name in names)


def test_views_unregistered_areZero(registry, outsider):
    assert registry.isRegistered(outsider) is False
    assert registry.reputationOf(outsider) == 0
    assert registry.lastSeenBlock(outsider) == 0
    assert tuple(registry.capabilityOf(outsider)) == NO_CAPABILITY
    assert registry.identityOf(outsider)[0] is False
    assert registry.hasParticipantRole(outsider, WORKER) is False


def test_hasParticipantRole_checksEveryBit(registry, alice):
    register_worker(registry, alice, WORKER | SUBMITTER)
    assert registry.hasParticipantRole(alice, WORKER)
    assert registry.hasParticipantRole(alice, SUBMITTER)
    assert registry.hasParticipantRole(alice, WORKER | SUBMITTER)
    assert not registry.hasParticipantRole(alice, VERIFIER)
    assert not registry.hasParticipantRole(alice, WORKER | VERIFIER)
    assert not registry.hasParticipantRole(alice, 0)


# ------------------------------------------------------------------ participant updates


def test_updateProfile_replacesProfile_andCountsAsSeen(registry, alice, chain):
    register_worker(registry, alice)
    chain.mine(3)
    capability = (2, 81_920, 5_000, 7, 4)
    tx = registry.updateProfile("bafynewcid", OTHER_HASH, capability, {"from": alice})
    event = tx.events["ProfileUpdated"]
    assert event["account"] == alice
    assert event["profileCid"] == "bafynewcid"
    assert event["profileHash"] == OTHER_HASH
    assert tuple(event["capability"]) == capability
    ident = registry.identityOf(alice)
    assert ident[5] == OTHER_HASH and ident[6] == "bafynewcid" and tuple(ident[7]) == capability
    assert registry.lastSeenBlock(alice) == tx.block_number
    assert ident[3] < tx.block_number  # registeredAtBlock unchanged


def test_updateProfile_unregistered_reverts(registry, outsider):
    with brownie.reverts(f"IdentityNotRegistered: {lo(outsider)}"):
        registry.updateProfile(PROFILE_CID, PROFILE_HASH, WORKER_CAPABILITY, {"from": outsider})


def test_updateProfile_workerInvalidCapability_reverts(registry, alice):
    register_worker(registry, alice)
    with brownie.reverts("IdentityInvalidCapability: 0, 0"):
        registry.updateProfile(PROFILE_CID, PROFILE_HASH, NO_CAPABILITY, {"from": alice})


def test_updateProfile_invalidProfile_reverts(registry, alice):
    register_worker(registry, alice)
    with brownie.reverts("IdentityInvalidProfileCid: 0"):
        registry.updateProfile("", PROFILE_HASH, WORKER_CAPABILITY, {"from": alice})
    with brownie.reverts("IdentityZeroProfileHash: "):
        registry.updateProfile(PROFILE_CID, "0x" + "00" * 32, WORKER_CAPABILITY, {"from": alice})


def test_updateProfile_nonWorker_mayClearCapability(registry, alice):
    registry.register(VERIFIER, PROFILE_CID, PROFILE_HASH, WORKER_CAPABILITY, {"from": alice})
    registry.updateProfile(PROFILE_CID, PROFILE_HASH, NO_CAPABILITY, {"from": alice})
    assert tuple(registry.capabilityOf(alice)) == NO_CAPABILITY


def test_setRoles_changesRoles_andEmits(registry, alice):
    register_worker(registry, alice)
    tx = registry.setRoles(VERIFIER | SUBMITTER, {"from": alice})
    assert tx.events["RolesChanged"]["account"] == alice
    assert tx.events["RolesChanged"]["oldRoles"] == WORKER
    assert tx.events["RolesChanged"]["newRoles"] == VERIFIER | SUBMITTER
    assert registry.identityOf(alice)[1] == VERIFIER | SUBMITTER
    assert registry.lastSeenBlock(alice) == tx.block_number


def test_setRoles_addWorkerWithoutCapability_reverts(registry, alice):
    registry.register(VERIFIER, PROFILE_CID, PROFILE_HASH, NO_CAPABILITY, {"from": alice})
    with brownie.reverts("IdentityInvalidCapability: 0, 0"):
        registry.setRoles(WORKER | VERIFIER, {"from": alice})


def test_setRoles_invalid_reverts(registry, alice, outsider):
    register_worker(registry, alice)
    with brownie.reverts("IdentityInvalidRoles: 0"):
        registry.setRoles(0, {"from": alice})
    with brownie.reverts("IdentityInvalidRoles: 16"):
        registry.setRoles(16, {"from": alice})
    with brownie.reverts(f"IdentityNotRegistered: {lo(outsider)}"):
        registry.setRoles(WORKER, {"from": outsider})


def test_heartbeat_updatesLastSeen_andEmits(registry, alice, chain):
    register_worker(registry, alice)
    chain.mine(5)
    tx = registry.heartbeat({"from": alice})
    assert tx.events["HeartbeatRecorded"]["account"] == alice
    assert tx.events["HeartbeatRecorded"]["atBlock"] == tx.block_number
    assert registry.lastSeenBlock(alice) == tx.block_number


def test_heartbeat_unregistered_reverts(registry, outsider):
    with brownie.reverts(f"IdentityNotRegistered: {lo(outsider)}"):
        registry.heartbeat({"from": outsider})


# ------------------------------------------------------------------ recorder writes


def test_recordTaskCompleted_updatesHistoryAndReputation(registry, market, alice):
    register_worker(registry, alice)
    tx = registry.recordTaskCompleted(alice, 1_234, {"from": market})
    assert tx.events["TaskCompletionRecorded"]["account"] == alice
    assert tx.events["TaskCompletionRecorded"]["compute"] == 1_234
    assert tx.events["TaskCompletionRecorded"]["tasksDone"] == 1
    assert tx.events["ReputationChanged"]["account"] == alice
    assert tx.events["ReputationChanged"]["oldReputation"] == 5_000
    assert tx.events["ReputationChanged"]["newReputation"] == completed(5_000) == 5_250
    registry.recordTaskCompleted(alice, 766, {"from": market})
    history = registry.identityOf(alice)[8]
    assert history[0] == 2  # tasksDone
    assert history[6] == 2_000  # computeContributed
    assert registry.reputationOf(alice) == completed(5_250)


def test_recordTasksCompleted_isCountCompletionsInOneRecord(registry, market, alice, bob):
    register_worker(registry, alice)
    register_worker(registry, bob)
    tx = registry.recordTasksCompleted(alice, 3, 300, {"from": market})
    assert len(tx.events["TaskCompletionRecorded"]) == 1 and len(tx.events["ReputationChanged"]) == 1
    assert tx.events["TaskCompletionRecorded"]["compute"] == 300 and tx.events["TaskCompletionRecorded"]["tasksDone"] == 3
    # the same as three single records, formula applied three times
    for compute in (100, 100, 100):
        registry.recordTaskCompleted(bob, compute, {"from": market})
    assert registry.reputationOf(alice) == registry.reputationOf(bob) == completed(completed(completed(5_000)))
    assert tx.events["ReputationChanged"]["newReputation"] == registry.reputationOf(alice)
    assert registry.identityOf(alice)[8] == registry.identityOf(bob)[8]
    # the rule's fixed point: many completions at once never pass the bound
    registry.recordTasksCompleted(alice, 10_000, 0, {"from": market})
    assert registry.reputationOf(alice) <= 10_000 and registry.identityOf(alice)[8][0] == 10_003


def test_recordTasksCompleted_byNonRecorder_orUnregistered_reverts(registry, market, alice, outsider):
    with brownie.reverts(f"AccessControlUnauthorizedAccount: {lo(outsider)}, {RECORDER!r}"):
        registry.recordTasksCompleted(alice, 1, 1, {"from": outsider})
    with brownie.reverts(f"IdentityNotRegistered: {lo(alice)}"):
        registry.recordTasksCompleted(alice, 1, 1, {"from": market})


def test_recordTaskFailed_updatesHistoryAndReputation(registry, market, alice):
    register_worker(registry, alice)
    tx = registry.recordTaskFailed(alice, {"from": market})
    assert tx.events["TaskFailureRecorded"]["account"] == alice
    assert tx.events["TaskFailureRecorded"]["tasksFailed"] == 1
    assert tx.events["ReputationChanged"]["newReputation"] == failed(5_000) == 3_750
    assert registry.identityOf(alice)[8][1] == 1


def test_recordTimeout_updatesHistoryAndReputation(registry, market, alice):
    register_worker(registry, alice)
    tx = registry.recordTimeout(alice, {"from": market})
    assert tx.events["TimeoutRecorded"]["account"] == alice
    assert tx.events["TimeoutRecorded"]["tasksTimedOut"] == 1
    assert tx.events["ReputationChanged"]["newReputation"] == timed_out(5_000) == 4_500
    assert registry.identityOf(alice)[8][2] == 1


def test_recordDispute_won_updatesHistoryAndReputation(registry, market, alice):
    register_worker(registry, alice)
    tx = registry.recordDispute(alice, True, 0, {"from": market})
    assert tx.events["DisputeRecorded"]["account"] == alice
    assert tx.events["DisputeRecorded"]["won"] is True
    assert tx.events["DisputeRecorded"]["amountSlashed"] == 0
    assert tx.events["ReputationChanged"]["newReputation"] == dispute_won(5_000) == 5_500
    history = registry.identityOf(alice)[8]
    assert history[3] == 1 and history[4] == 0


def test_recordDispute_lost_updatesHistoryAndReputation(registry, market, alice):
    register_worker(registry, alice)
    tx = registry.recordDispute(alice, False, 7 * 10**18, {"from": market})
    assert tx.events["DisputeRecorded"]["won"] is False
    assert tx.events["DisputeRecorded"]["amountSlashed"] == 7 * 10**18
    assert tx.events["ReputationChanged"]["newReputation"] == dispute_lost(5_000) == 2_500
    history = registry.identityOf(alice)[8]
    assert history[3] == 0 and history[4] == 1 and history[5] == 7 * 10**18


@pytest.mark.parametrize(
    "call",
    [
        lambda r, a, s: r.recordTaskCompleted(a, 1, s),
        lambda r, a, s: r.recordTaskFailed(a, s),
        lambda r, a, s: r.recordTimeout(a, s),
        lambda r, a, s: r.recordDispute(a, True, 0, s),
    ],
    ids=["completed", "failed", "timeout", "dispute"],
)
def test_record_byNonRecorder_reverts(registry, alice, call):
    register_worker(registry, alice)
    with brownie.reverts(f"AccessControlUnauthorizedAccount: {lo(alice)}, {RECORDER!r}"):
        call(registry, alice, {"from": alice})


@pytest.mark.parametrize(
    "call",
    [
        lambda r, a, s: r.recordTaskCompleted(a, 1, s),
        lambda r, a, s: r.recordTaskFailed(a, s),
        lambda r, a, s: r.recordTimeout(a, s),
        lambda r, a, s: r.recordDispute(a, False, 5, s),
    ],
    ids=["completed", "failed", "timeout", "dispute"],
)
def test_record_unregistered_reverts(registry, market, outsider, call):
    with brownie.reverts(f"IdentityNotRegistered: {lo(outsider)}"):
        call(registry, outsider, {"from": market})


def test_recorderRole_revoked_cannotRecord(registry, deployer, market, alice):
    register_worker(registry, alice)
    registry.revokeRole(RECORDER_ROLE, market, {"from": deployer})
    with brownie.reverts(f"AccessControlUnauthorizedAccount: {lo(market)}, {RECORDER!r}"):
        registry.recordTimeout(alice, {"from": market})


def test_renounceRole_forAnotherAccount_reverts(registry, market, alice):
    with brownie.reverts("AccessControlBadConfirmation: "):
        registry.renounceRole(RECORDER_ROLE, alice, {"from": market})


def test_grantRole_byNonAdmin_reverts(registry, alice):
    admin = bytes(32)
    with brownie.reverts(f"AccessControlUnauthorizedAccount: {lo(alice)}, {admin!r}"):
        registry.grantRole(RECORDER_ROLE, alice, {"from": alice})


def test_reputation_followsFormula_andStaysInBounds(registry, market, alice):
    """invariant_reputation_bounded: 0 ≤ rep ≤ 10_000 and every step matches the formula."""
    register_worker(registry, alice)
    rng = random.Random(11)
    model = 5_000
    steps = [
        ("completed", completed, lambda: registry.recordTaskCompleted(alice, 1, {"from": market})),
        ("failed", failed, lambda: registry.recordTaskFailed(alice, {"from": market})),
        ("timeout", timed_out, lambda: registry.recordTimeout(alice, {"from": market})),
        ("won", dispute_won, lambda: registry.recordDispute(alice, True, 0, {"from": market})),
        ("lost", dispute_lost, lambda: registry.recordDispute(alice, False, 1, {"from": market})),
    ]
    # Long runs of rises and of falls push the score against both bounds.
    plan = [steps[0]] * 40 + [steps[3]] * 20 + [steps[4]] * 20 + [steps[1]] * 10
    plan += [rng.choice(steps) for _ in range(40)]
    for _, formula, send in plan:
        tx = send()
        old, model = model, formula(model)
        assert tx.events["ReputationChanged"]["oldReputation"] == old
        assert tx.events["ReputationChanged"]["newReputation"] == model
        assert 0 <= model <= 10_000
    assert registry.reputationOf(alice) == model


def test_reputation_riseNeverExceedsMax_fallNeverBelowZero():
    """The formula alone, exhaustively over every score: rises stay ≤ 10_000, falls ≥ 0."""
    for rep in range(0, 10_001):
        for rise in (completed, dispute_won):
            assert rep <= rise(rep) <= 10_000
        for fall in (failed, timed_out, dispute_lost):
            assert 0 <= fall(rep) <= rep
