"""Deploy the whole contract stack, wire its roles once, seal it, and record it in ``deployments/``.

After wiring, the deployer renounces every power it had (``seal``): no address can grant
itself a role that moves stakes, and the two StakeManager parameters change only through
the ParameterTimelock (delay ``timelock_delay_seconds``; 0 on a devnet). Running it twice
against the same chain reuses what is there: a contract whose recorded code is still at its
address is not deployed again, a role already granted is not granted again, and a sealed
stack stays sealed. A restarted devnet has lost the code, so everything is deployed afresh.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from eth_account.signers.local import LocalAccount
from web3 import Web3

from truetrain.chain.client import ChainClient
from truetrain.chain.deployment import (
    DeployedContract, Deployment, codehash, is_live, read_deployment, write_deployment,
)
from truetrain.errors import DeploymentError
from truetrain.hashing import keccak256
from truetrain.trace.kind_names import CONTRACTS as KIND_CONTRACTS
from truetrain.paths import DEPLOYMENTS


@dataclass(frozen=True)
class StackParams:
    """Deployment parameters; defaults suit a local devnet."""

    devnet: bool = True
    #: The token's initial distribution (address → wei). A live token must have one (it can
    #: never mint); a devnet mints through its faucet instead. See docs/token.md.
    distribution: tuple[tuple[str, int], ...] = ()
    #: ParameterTimelock: seconds between scheduling a parameter change and executing it.
    timelock_delay_seconds: int = 0
    #: Who may schedule parameter changes on the timelock (default: the deployer).
    proposers: tuple[str, ...] = ()
    unbonding_delay_blocks: int = 20
    liveness_window_blocks: int = 1_000
    region_boost: int = 4
    #: JobMarket.MarketConfig: share of collateral a late worker loses (bps), the same for an
    #: offer left unanswered, and the auditor's collateral and timeout penalty (wei).
    timeout_penalty_bps: int = 1_000
    accept_penalty_bps: int = 100
    auditor_collateral: int = 50 * 10**18
    auditor_penalty: int = 5 * 10**18
    #: DisputeGame.GameConfig: each party's clock, the referees' commit and reveal windows
    #: (blocks), the committee size, the free stake a referee needs (locked while it votes)
    #: and what a referee voting against the outcome or not revealing loses (wei).
    dispute_clock_blocks: int = 30
    commit_window_blocks: int = 30
    reveal_window_blocks: int = 30
    committee_size: int = 3
    referee_stake: int = 50 * 10**18
    referee_penalty: int = 5 * 10**18

    def market_config(self) -> tuple:
        return (self.timeout_penalty_bps, self.accept_penalty_bps, self.auditor_collateral, self.auditor_penalty)

    def token_args(self) -> tuple:
        return (self.devnet, [Web3.to_checksum_address(a) for a, _ in self.distribution],
                [int(v) for _, v in self.distribution])

    def game_config(self) -> tuple:
        return (self.dispute_clock_blocks, self.commit_window_blocks, self.reveal_window_blocks, self.committee_size,
                self.referee_stake, self.referee_penalty)


def _kinds_key(contract: str) -> str:
    """A kinds contract's key in a deployment: ``StepKindsCore`` → ``kinds.core``."""
    return "kinds." + contract.removeprefix("StepKinds").lower()


def _step_game_args(d: dict[str, str]) -> tuple:
    """StepGame's constructor: every operator kind's id (keccak256 of its name) and the
    kinds contract that recomputes it, from the one kind table."""
    pairs = [(kind, d[_kinds_key(c)]) for c in KIND_CONTRACTS for kind in KIND_CONTRACTS[c]]
    return ["0x" + keccak256(k.encode()).hex() for k, _ in pairs], [a for _, a in pairs]


@dataclass(frozen=True)
class Step:
    key: str
    contract: str
    args: Callable[[dict[str, str], StackParams], tuple]
    #: library name → key of the step that deployed it
    links: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Grant:
    on: str           # key of the contract whose role is granted
    role: str         # name of the public bytes32 constant, e.g. "MARKET_ROLE"
    to: str           # key of the contract that receives it


STEPS: list[Step] = [
    Step("token", "TrainToken", lambda d, p: p.token_args()),
    Step("registry", "IdentityRegistry", lambda d, p: ()),
    Step("stake", "StakeManager", lambda d, p: (d["token"], p.unbonding_delay_blocks)),
    Step("pool", "WorkerPool", lambda d, p: (d["registry"], d["stake"], p.liveness_window_blocks, p.region_boost)),
    Step("recovery", "TaskRecovery", lambda d, p: ()),
    Step("book", "JobBook", lambda d, p: ()),
    Step("market", "JobMarket", lambda d, p: (d["token"], d["registry"], d["stake"], d["pool"], p.market_config()),
         links={"TaskRecovery": "recovery", "JobBook": "book"}),
    # The one-step verifiers (one contract per group of operator kinds) and the StepGame that
    # ends a repro dispute on them (docs/onestep.md, "Wiring").
    *[Step(_kinds_key(c), c, lambda d, p: ()) for c in KIND_CONTRACTS],
    Step("stepgame", "StepGame", lambda d, p: _step_game_args(d)),
    Step("game", "DisputeGame",
         lambda d, p: (d["market"], d["pool"], d["stake"], d["registry"], p.game_config(), d["stepgame"])),
    Step("timelock", "ParameterTimelock",
         lambda d, p: (p.timelock_delay_seconds, [Web3.to_checksum_address(a) for a in p.proposers or (d["deployer"],)])),
]
#: The pool locks collateral for draws; the market and the game hold verifier weights for
#: the draws they request (DRAW_ROLE); the market records task outcomes;
#: the dispute game locks bonds, slashes, records dispute history and resolves disputed tasks.
GRANTS: list[Grant] = [
    Grant("stake", "MARKET_ROLE", "pool"),
    Grant("stake", "MARKET_ROLE", "market"),
    Grant("registry", "RECORDER_ROLE", "market"),
    Grant("pool", "MARKET_ROLE", "market"),
    Grant("pool", "DRAW_ROLE", "market"),
    Grant("pool", "DRAW_ROLE", "game"),
    Grant("stake", "MARKET_ROLE", "game"),
    Grant("registry", "RECORDER_ROLE", "game"),
    Grant("stake", "PARAMETER_ROLE", "timelock"),
]
#: AccessControl contracts whose DEFAULT_ADMIN_ROLE the deployer renounces once wired.
SEALED = ("stake", "registry", "pool")


@dataclass
class DeployReport:
    deployment: Deployment
    deployed: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    granted: list[str] = field(default_factory=list)
    sealed: list[str] = field(default_factory=list)


def deploy_stack(client: ChainClient, deployer: LocalAccount, params: StackParams = StackParams(),
                 *, steps: list[Step] = STEPS, grants: list[Grant] = GRANTS,
                 folder: Path = DEPLOYMENTS) -> DeployReport:
    """Deploy what is missing, grant what is not granted, write the deployment file."""
    w3 = client.w3
    chain_id = w3.eth.chain_id
    try:
        previous = read_deployment(chain_id, folder)
    except DeploymentError:
        previous = None
    if previous is not None and (not is_live(w3, previous) or {st.key for st in steps} - set(previous.contracts)):
        # A stack is wired and sealed as a whole: one that lost (or never had) a part is redeployed.
        previous = None
    deployment = previous or Deployment(chain_id, w3.eth.block_number)
    report = DeployReport(deployment)
    addresses = {k: c.address for k, c in deployment.contracts.items()}
    addresses["deployer"] = deployer.address
    for step in steps:
        if step.key in addresses:
            report.reused.append(step.key)
            continue
        libraries = {lib: addresses[key] for lib, key in step.links.items()}
        contract, _ = client.deploy(step.contract, *step.args(addresses, params), sender=deployer, libraries=libraries)
        addresses[step.key] = contract.address
        deployment.contracts[step.key] = DeployedContract(step.contract, contract.address, codehash(w3, contract.address))
        report.deployed.append(step.key)
    names = {s.key: s.contract for s in steps}
    handle = {k: client.contract(names[k], a) for k, a in addresses.items() if k in names}
    stake = handle["stake"]
    pool = Web3.to_checksum_address(addresses["pool"])
    if client.call(stake.functions.listener()) != pool:
        client.transact(stake.functions.setListener(pool), deployer)
        report.granted.append("stake.listener -> pool")
    market = handle["market"]
    game = Web3.to_checksum_address(addresses["game"])
    if not client.call(market.functions.isDisputeGame(game)):
        client.transact(market.functions.wireDisputeGame(game), deployer)
        report.granted.append("market.disputeGame -> game")
    for grant in grants:
        target = client.contract(names[grant.on], addresses[grant.on])
        role = client.call(getattr(target.functions, grant.role)())
        grantee = Web3.to_checksum_address(addresses[grant.to])
        if not client.call(target.functions.hasRole(role, grantee)):
            client.transact(target.functions.grantRole(role, grantee), deployer)
            report.granted.append(f"{grant.on}.{grant.role} -> {grant.to}")
    report.sealed = seal(client, deployer, handle)
    write_deployment(deployment, folder)
    return report


def seal(client: ChainClient, deployer: LocalAccount, handle: dict) -> list[str]:
    """Give up every power the deployer holds once the stack is wired: its PARAMETER_ROLE
    and DEFAULT_ADMIN_ROLE on the AccessControl contracts, and the market's wiring."""
    me, sealed = deployer.address, []
    stake = handle["stake"]
    parameter = client.call(stake.functions.PARAMETER_ROLE())
    if client.call(stake.functions.hasRole(parameter, me)):
        client.transact(stake.functions.renounceRole(parameter, me), deployer)
        sealed.append("stake.PARAMETER_ROLE")
    for key in SEALED:
        contract = handle[key]
        admin = client.call(contract.functions.DEFAULT_ADMIN_ROLE())
        if client.call(contract.functions.hasRole(admin, me)):
            client.transact(contract.functions.renounceRole(admin, me), deployer)
            sealed.append(f"{key}.DEFAULT_ADMIN_ROLE")
    market = handle["market"]
    if not client.call(market.functions.wiringSealed()):
        client.transact(market.functions.sealWiring(), deployer)
        sealed.append("market.wiring")
    return sealed
