"""Creating a job: the market terms a submitter chooses, the escrow they cost, the call."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from web3.logs import DISCARD

from truetrain.errors import ConfigError, ContractRevert
from truetrain.network import MAX_FETCH_KIBPS, MAX_RPC_RTT_MS
from truetrain.trace.binding import Binding, job_binding, unbound_reason
from truetrain.training import Manifest

from .stages import stage_count

log = logging.getLogger("truetrain.market")


#: JobMarket's bounds on a job's money (IJobMarket.MIN_COLLATERAL, MAX_COLLATERAL_PER_REWARD): the
#: least worker collateral, in wei (also the least bond of a challenge), and the most, as a
#: multiple of the reward per task. A job must pay a nonzero reward.
MIN_COLLATERAL = 20 * 10**18
MAX_COLLATERAL_PER_REWARD = 100
#: Its bounds on a job's windows (IJobMarket.MIN_WINDOW_BLOCKS, MAX_REVEAL_WINDOW_BLOCKS), in blocks.
MIN_WINDOW_BLOCKS = 5
MAX_REVEAL_WINDOW_BLOCKS = 200


@dataclass(frozen=True)
class JobTerms:
    """What a submitter offers and requires, beside the manifest. Windows are in blocks."""

    reward_per_task: int
    audit_fee: int
    worker_collateral: int
    accept_window: int = 20
    compute_window: int = 60
    reveal_window: int = 60
    #: At least the compute window (the contracts refuse less): a third party must be able to
    #: re-run the task and challenge it in time.
    challenge_window: int = 60
    device_class: int = 1
    memory_mib: int = 1024
    preferred_region: int = 0
    audit_rate_bps: int = 5_000
    expiry_blocks: int = 100_000
    #: Network terms on the worker drawn for each task (0 = none): its declared shard-fetch
    #: throughput at least this many KiB/s, its RPC round-trip at most this many ms, both
    #: measured within the pool's liveness window (truetrain.network).
    min_fetch_kibps: int = 0
    max_rpc_rtt_ms: int = 0

    def __post_init__(self) -> None:
        for name, high in (("min_fetch_kibps", MAX_FETCH_KIBPS), ("max_rpc_rtt_ms", MAX_RPC_RTT_MS)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
                raise ConfigError(f"{name} must be an integer in [0, {high:,}], got {value!r}")

    def escrow(self, shards: int, rounds: int) -> int:
        """(shards + 1) × rounds × (reward + audit fee): every task, aggregation ones included."""
        return (shards + 1) * rounds * (self.reward_per_task + self.audit_fee)

    def params(self, manifest: Manifest, manifest_cid: str, block: int) -> tuple:
        """The JobParams tuple for ``createJob``. A pipelined manifest's round is its shards ×
        stages tasks on chain (``stage_tasks``), in groups of ``stages``."""
        initial = manifest.initial_checkpoint
        stages = stage_count(manifest)
        return (manifest_cid, manifest.hash(), initial.cid if initial else "", initial.hash if initial else bytes(32),
                len(manifest.shards) * stages, manifest.rounds, self.reward_per_task, self.audit_fee,
                self.worker_collateral, self.accept_window, self.compute_window, self.reveal_window,
                self.challenge_window, self.device_class, self.memory_mib, self.preferred_region, self.audit_rate_bps,
                manifest.steps_per_task * manifest.batch_size, block + self.expiry_blocks,
                manifest.checkpoint_leaves, self.min_fetch_kibps, self.max_rpc_rtt_ms, stages)


#: The submitter CLI's default terms. The collateral is 4 × the reward: with half the tasks
#: audited, a wrong result then loses 15 TRAIN a task in expectation, and colluders need
#: about 30 % of the verifiers' weight before buying committee seats could pay
#: (bench/economics.py prints both).
DEFAULT_TERMS = JobTerms(reward_per_task=10 * 10**18, audit_fee=2 * 10**18, worker_collateral=40 * 10**18)


#: The most tasks a round may train (JobBook.MAX_SHARDS: the round's counters are 16 bits).
MAX_SHARD_TASKS = 65_535


def create_job(contracts, account, manifest: Manifest, manifest_cid: str, terms: JobTerms,
               shard_bytes: Callable[[int], bytes] | None = None) -> tuple[int, int]:
    """Approve exactly the escrow, create the job and, given ``shard_bytes(k)`` (shard k's
    bytes), bind its program (:func:`bind_after_create`); return (job id, escrow)."""
    client, token, market = contracts.client, contracts.token, contracts.market
    tasks = len(manifest.shards) * stage_count(manifest)
    if tasks > MAX_SHARD_TASKS:
        raise ConfigError(f"a round has {tasks} shard tasks; the market takes at most {MAX_SHARD_TASKS}")
    escrow = terms.escrow(tasks, manifest.rounds)
    binding = program_binding(contracts, manifest, shard_bytes) if shard_bytes is not None else None
    params = terms.params(manifest, manifest_cid, client.w3.eth.block_number)
    client.transact(token.functions.approve(market.address, escrow), account)
    # A bound job's binding goes out as soon as the creation is mined, without waiting for
    # confirmations: the first draw settles at least three blocks after the creation.
    receipt = client.transact(market.functions.createJob(params), account, confirmations=0 if binding else None)
    created = market.events.JobCreated().process_receipt(receipt.raw, errors=DISCARD)
    job_id = created[0]["args"]["jobId"]
    if binding is not None:
        bind_after_create(contracts, lambda call: client.transact(call, account), job_id, binding)
    return job_id, escrow


def bind_after_create(contracts, send: Callable, job_id: int, binding: Binding) -> bool:
    """Send job ``job_id``'s binding through ``send(call)`` (its submitter's), as soon as its
    creation is mined: it must land before the job's first draw, which asks for a ticket the
    block after the creation at the earliest and settles at least two blocks after that
    (FutureRandomness' DELAY). False (logged) when a draw came first
    (``DisputeProgramTooLate``): the job goes on unbound, its disputes ending with a
    committee. Any other refusal is raised."""
    try:
        send(contracts.game.functions.bindProgram(job_id, binding.as_tuple()))
        return True
    except ContractRevert as exc:
        if exc.error != "DisputeProgramTooLate":
            raise
        log.warning("job %d: a task was drawn before its program was bound; its disputes end with a committee", job_id)
        return False


def program_binding(contracts, manifest: Manifest, shard_bytes: Callable[[int], bytes]) -> Binding | None:
    """The binding ``manifest``'s job sends to DisputeGame.bindProgram, computed before the
    job is created (so it goes out the block after): None when the deployment has no
    StepGame or the job cannot bind one (:func:`~truetrain.trace.binding.unbound_reason`:
    its disputes then end with a committee)."""
    if unbound_reason(manifest) is not None or int(contracts.game.functions.stepGame().call(), 16) == 0:
        return None
    return job_binding(manifest, shard_bytes)


def shards_of(store, manifest: Manifest) -> Callable[[int], bytes]:
    """``shard_bytes`` for :func:`create_job`: shard k's bytes from ``store``, checked against the manifest."""
    from .reader import MAX_OBJECT_BYTES

    return lambda k: store.fetch(manifest.shards[k].cid, manifest.shards[k].hash, max_size=MAX_OBJECT_BYTES)


def publish_manifest(store, manifest: Manifest) -> str:
    """Store the manifest's canonical bytes; return its CID."""
    return store.add_bytes(manifest.to_bytes()).cid


def ensure_registered(contracts, store, account, roles: int) -> bool:
    """Register ``account``'s identity with ``roles`` (hardware profile on IPFS) unless it
    has one holding them; True when a transaction was sent."""
    from truetrain.hardware import detect

    registry, client = contracts.registry, contracts.client
    identity = registry.functions.identityOf(account.address).call()
    if identity[0] and identity[1] & roles == roles:
        return False
    if identity[0]:
        client.transact(registry.functions.setRoles(identity[1] | roles), account)
        return True
    profile = detect(measure=False)
    stored = store.add_bytes(profile.canonical_json())
    capability = (profile.device_class, profile.memory_mib, max(1, profile.throughput_gflops), 0, 1)
    client.transact(registry.functions.register(roles, stored.cid, stored.hash, capability), account)
    return True
