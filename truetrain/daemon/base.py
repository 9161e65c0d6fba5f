"""The run loop both daemons share: connect, take part, follow events, drive the book.

A daemon is a scanner plus small state machines. Each tick it (1) lets the event follower
deliver new market events from its SQLite cursor, and the role's ``on_event`` opens book
entries for the tasks that concern it; (2) steps every open entry once: the role's ``step``
reads the task's state *from the chain* and sends at most the one transaction that moves
it on, so a re-delivered event or a restart never sends a transaction twice; (3) does the
keeper's upkeep when enabled, a heartbeat when due, and withdraws earnings. Failures are
logged and counted and the loop goes on, unless the node is no longer the daemon's chain:
then it says so in one line and waits for that chain (truetrain.daemon.chain_guard).
SIGTERM lets the current transaction finish and then stops the loop before the next one.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from truetrain.chain.client import ChainClient
from truetrain.chain.events import EventFollower, Subscription
from truetrain.chain.handles import connect_deployment
from truetrain.chain.raw import height
from truetrain.chain.settings import FollowerSettings
from truetrain.chain.watch import ChainWatch
from truetrain.cli_options import load_account
from truetrain.daemon.book import Book, Entry
from truetrain.daemon.chain_guard import ChainGuard
from truetrain.daemon.faults import Faults
from truetrain.daemon.keeper import Keeper
from truetrain.daemon.lane import Lane, Pending
from truetrain.daemon.membership import Membership
from truetrain.daemon.metrics import Metrics
from truetrain.daemon.network import NetworkDeclarer
from truetrain.daemon.schedule import work_book
from truetrain.daemon.settings import DaemonSettings
from truetrain.daemon.stepping import Stepping
from truetrain.dispute import GameDriver, GameStatus, GameView, Trace
from truetrain.errors import ChainChanged, ContractRevert, TruetrainError
from truetrain.hardware import detect
from truetrain.training import native, tensor_roots
from truetrain.training.allocator import keep_freed_memory
from truetrain.training.gemm_check import engine_for, kernel_check
from truetrain.market import MarketReader, ResultBundle, TaskStatus
from truetrain.market.stages import StageBundle
from truetrain.network import FetchMeter
from truetrain.storage import StorageSettings, connect_store

log = logging.getLogger("truetrain.daemon")

#: Every JobMarket event a daemon or its keeper reacts to.
MARKET_EVENTS = (
    "JobCreated", "TaskDrawn", "TaskAccepted", "ResultCommitted", "AuditorDrawn", "AuditWaived",
    "AuditCommitted", "ResultRevealed", "AuditRevealed", "ChallengeWindowOpened", "TaskDisputed",
    "DisputeResolved", "TaskFinalized", "TaskTimedOut", "TaskRequeued", "TaskClosed", "RoundAdvanced",
    "JobCompleted", "JobCancelled", "JobExpired", "JobInputsUnavailable",
)
#: Every DisputeGame event a daemon reacts to.
GAME_EVENTS = ("DisputeOpened", "RefereesDrawn")
#: Every WorkerPool event a daemon reacts to: its verifier weight was left as it was while
#: the verifier tree was held for a pending draw.
POOL_EVENTS = ("VerifierWeightDeferred", "WorkerWeightDeferred")
#: A task whose step failed this many times with a non-retryable error is given up on.
MAX_ATTEMPTS = 5
GAS_CEILING = 5_000_000
#: Extra tries of the start's chain pin when the node gives no answer.
PIN_RETRIES = 4
RANDOM_PATH_GAS = 500_000


class Stopping(Exception):
    """Raised inside a step when SIGTERM arrived before the next transaction."""


class Daemon(Membership):
    """Base of the worker and verifier daemons; subclasses set ``role``, ``role_bits`` and
    ``kinds`` and implement ``on_event`` and ``step``. Its standing in the market (identity,
    stake, heartbeat, earnings) is kept by :class:`Membership`."""

    role = "daemon"
    role_bits = 0
    #: The book's entry kinds, most urgent first (see truetrain.daemon.schedule).
    kinds: tuple[str, ...] = ()
    #: Kinds whose step asks the lane for a training or a replay (and may fetch and publish
    #: a whole task's data): worked one entry at a time, with the urgent kinds stepped again
    #: after each.
    slow_kinds: frozenset[str] = frozenset()
    #: Whether the daemon measures and declares its network figures (truetrain.daemon.network):
    #: a worker does, since jobs may set network terms on the workers drawn for them.
    declares_network = False

    def __init__(self, settings: DaemonSettings):
        self.settings = settings
        self.account = load_account(settings.key, settings.keystore, settings.account_index)
        self.address = self.account.address
        self.stop_event = threading.Event()
        #: set when the loop should tick before its poll interval is out (a computation
        #: ended in the lane, or a stop was asked for)
        self.wake = threading.Event()
        self.metrics = Metrics(self.role)
        self.state_dir = settings.state_path(self.address)
        self.book = Book(self.state_dir / "book.sqlite")
        self.device = settings.torch_device()
        self.keeper = Keeper(self) if settings.keeper else None
        self.faults = Faults.from_env()
        #: Training and replays run here, so the loop keeps moving games meanwhile.
        self.lane = Lane(f"{self.role}-lane", threads=self.lane_threads(), on_done=self.wake.set)
        self.ticks = 0
        self.tick_block: int | None = None  # the chain's height when the last full pass began
        self._last_seen = -(2**63)  # the registry's lastSeenBlock for us, as last read or sent
        self.block = 0
        self.declarer: NetworkDeclarer | None = None
        #: Our pool weights may lag our stake (a change made while draws or offers were held,
        #: or one from before this start): refresh them once the holds are over.
        self.weight_deferred = True

    def lane_threads(self) -> int:
        """How many computations run at once: one (a worker runs its declared capacity)."""
        return 1

    # --- connecting and taking part -----------------------------------------------------

    def connect(self) -> None:
        client = ChainClient(self.settings.rpc_url, confirmations=self.settings.confirmations, gas_buffer=1.5)
        self.contracts = connect_deployment(client, self.settings.deployments)
        self.client = client
        watch = ChainWatch(self.settings.rpc_url, self.contracts.deployment)
        # The chain this daemon stays on: the deployment's, as the node is now (a request
        # lost on the way is asked again, as every later look of the guard would be).
        watch.pin(retries=PIN_RETRIES)
        self.chain = ChainGuard(watch, self.metrics.chain_changed, self.stop_event)
        client.while_waiting = self.chain.check  # a receipt wait on another chain ends at the next look
        self.market = self.contracts.market
        # Fails now, in one line, if no IPFS node answers.
        self.store = connect_store(StorageSettings(api_addr=self.settings.ipfs_api))
        #: Times the reader's verified fetches (shards, checkpoints): the declared throughput.
        self.meter = FetchMeter(self.store)
        self.reader = MarketReader(self.contracts, self.meter)
        self.game = self.contracts.game
        self.disputes = GameDriver(self.game, client.w3, self.address, self.send)
        self.stepping = Stepping(self.contracts, client.w3, self.address, self.send, self.reader, self.state_dir,
                                 self.faults.step_cheat)

    def send(self, name: str, call, *, random_path: bool = False):
        """Send one transaction (after a SIGTERM: none, :class:`Stopping` instead).

        ``random_path``: the call draws a worker or an auditor from the pool, whose state may
        move between the estimate and the block it is mined in, so the mined block may take
        a costlier path than the estimate did; it gets twice the estimate, at least
        ``RANDOM_PATH_GAS``.
        """
        if self.stop_event.is_set():
            raise Stopping(name)
        try:
            gas = None
            if random_path:
                gas = min(max(2 * self.client.estimate(call, self.account), RANDOM_PATH_GAS), GAS_CEILING)
            receipt = self.client.transact(call, self.account, gas=gas)
        except ContractRevert as exc:
            self.metrics.reverts.labels(exc.error).inc()
            raise
        self.metrics.transactions.labels(name).inc()
        log.info("sent %s", name, extra={"tx": receipt.tx_hash, "gas": receipt.gas_used, "block": receipt.block_number})
        self.faults.after_send(name)
        return receipt

    # --- disputes both roles take part in ------------------------------------------------

    def game_view(self, game_id: int) -> GameView:
        return GameView.read(self.game, game_id)

    def play_game(self, game_id: int, trace: Callable[[], Trace]) -> str | None:
        """Move dispute game ``game_id`` on, one transaction at most: level 0 here (the
        GameDriver), the levels after it in its StepGame once it went there. ``trace()`` gives
        our published checkpoint hashes and CIDs. Returns "won", "lost" or "void" once over."""
        g = self.game_view(game_id)
        if g.status == GameStatus.STEPPING:
            self.stepping.step(g, trace)
            return None
        return self.disputes.step(game_id, trace)

    def published_trace(self, task_id: int) -> Trace:
        """The checkpoint hashes and CIDs of the task's revealed result bundle, checked against
        its revealed root (this fails when the bundle is not retrievable)."""
        return self.reader.trace(task_id)

    def bundle_trace(self, cid: str, root: bytes) -> Trace:
        """The hashes and CIDs of a result (or stage) bundle this daemon published, checked against ``root``."""
        data = self.reader.fetch_bundle(cid)
        if StageBundle.is_stage(data):
            return StageBundle.from_bytes(data, root).trace()
        bundle = ResultBundle.from_bytes(data, root)
        return [c.hash for c in bundle.checkpoints], [c.cid for c in bundle.checkpoints]

    def open_audit_game(self, entry) -> None:
        """An audit of a task of ours mismatched: open its dispute game unless someone did."""
        task = self.reader.task(entry.task_id)
        game_id = self.game.functions.gameOfTask(entry.task_id).call()
        open_game = game_id != 0 and self.game_view(game_id).status not in (GameStatus.RESOLVED, GameStatus.VOIDED)
        if task.status != TaskStatus.DISPUTED or open_game:
            self.book.close_entry(entry.task_id, entry.kind, "done", f"game {game_id}")
            return
        self.send("openAuditDispute", self.game.functions.openAuditDispute(entry.task_id))

    # --- the role's part ----------------------------------------------------------------

    def on_event(self, event) -> None:
        raise NotImplementedError

    def step(self, entry: Entry) -> None:
        raise NotImplementedError

    def _dispatch(self, event) -> None:
        if event.event in POOL_EVENTS:
            if event.args["account"].lower() == self.address.lower():
                self.weight_deferred = True
            return
        self.on_event(event)
        if self.keeper is not None:
            self.keeper.on_event(event)

    # --- the loop -----------------------------------------------------------------------

    def guarded(self, what: str, action, *args) -> bool:
        """Run ``action``; log and count a failure instead of dying. False when it failed.

        Before a failure is logged, the node is compared with the daemon's chain: when it is
        another chain now, :class:`ChainChanged` goes up to the loop instead (the failure is
        only a consequence, and the loop would log one a call)."""
        try:
            action(*args)
            return True
        except Stopping:
            return False
        except ChainChanged:
            raise
        except Exception as exc:  # noqa: BLE001 - a daemon logs a bug and keeps its state
            self.chain.check()
            self.log_failure(what, exc)
        return False

    def log_failure(self, what: str, exc: Exception) -> None:
        """One warning for a refusal or a known error; a traceback for anything else (a bug)."""
        if isinstance(exc, ContractRevert):
            log.warning("%s refused: %s", what, exc)
            return
        self.metrics.errors.labels(type(exc).__name__).inc()
        if isinstance(exc, TruetrainError):
            log.warning("%s failed: %s: %s", what, type(exc).__name__, exc)
        else:
            log.error("%s failed unexpectedly", what, exc_info=exc)

    def step_entry(self, entry: Entry) -> None:
        try:
            self.step(entry)
        except Pending:
            return  # its computation runs in the lane: stepped again next tick
        except (Stopping, ContractRevert):
            raise
        except TruetrainError as exc:
            if not exc.retryable and self.book.failed_attempt(entry.task_id, entry.kind, str(exc)) >= MAX_ATTEMPTS:
                self.book.close_entry(entry.task_id, entry.kind, "failed", str(exc))
                log.error("gave up on task", extra={"task": str(entry.task_id), "kind": entry.kind})
            raise

    def _refresh(self) -> None:
        """Between slow steps: the chain's height and its new events (they may open urgent entries)."""
        self.block = height(self.client.w3)
        self.guarded("events", self.follower.poll)

    def tick(self) -> None:
        block = height(self.client.w3)
        # Everything a pass acts on moves with the chain (events, deadlines, draws, due
        # heartbeats) or with a computation finishing in the lane: at the same block with
        # nothing finished, the last pass already did it all. Skipping such ticks saves most
        # of an idle daemon's RPC calls when it polls faster than blocks come.
        if block == self.tick_block and not self.lane.ready():
            return
        self.tick_block = block
        self.ticks += 1
        self.block = block
        self.metrics.block.set(self.block)
        self.follower.poll(block)
        work_book(self.book, self.kinds, self.slow_kinds,
                  lambda entry: self.guarded(f"task {entry.task_id} ({entry.kind})", self.step_entry, entry),
                  self._refresh, self.stop_event.is_set)
        if self.stop_event.is_set():
            return
        if self.keeper is not None:
            self.guarded("keeper", self.keeper.tick)
        if self.declarer is not None:  # a declaration counts as a heartbeat: first
            self.guarded("network figures", self.declarer.tick, self.block)
        self.guarded("heartbeat", self.heartbeat_if_due)
        self.guarded("pool weight", self.refresh_weight_if_deferred)
        if self.ticks % 4 == 1:
            self.guarded("withdraw", self.withdraw_if_credited)
        if self.ticks % 20 == 1:
            self.metrics.sample_gpu()
        self.metrics.update_book(self.book.counts())

    def check_gemm(self):
        """Self-test the int8 GEMM kernel on the training device once (or take the route the
        settings force); log it, export it, and return the outcome."""
        engine_for(self.device, self.settings.gemm_route, fuse=self.settings.gemm_fuse)
        check = kernel_check(self.device)
        self.metrics.gemm_route.labels(check.device, check.route).set(1)
        return check

    def start(self) -> None:
        """Connect and take part (identity, stake, pool); build the event follower."""
        self.connect()
        keep_freed_memory()
        self.gemm = self.check_gemm()
        # Build (once per machine: up to half a minute of gcc on a loaded CPU) and self-test
        # the exact C kernels now, before the daemon takes part, not inside the compute
        # window of its first task (an honest worker's first task used to time out there).
        native.ready()
        tensor_roots.ready()  # a checkpoint's hash is its tensors' roots
        self.profile = detect(gemm_route=self.gemm.route)
        if self.settings.memory_mib:  # share part of the machine: declare (and hold to) less
            self.profile = replace(self.profile, memory_mib=min(self.profile.memory_mib, self.settings.memory_mib))
        self.profile = self.complete_profile(self.profile)
        genesis = bytes(self.client.w3.eth.get_block(0)["hash"]).hex()
        if self.book.bind_chain(f"{genesis}:{self.market.address}"):
            log.warning("the chain or market changed since the book was written: starting a fresh book")
        self.ensure_identity()
        self.ensure_stake()
        if self.declares_network:
            self.start_declaring_network()
        self.follower = EventFollower(
            self.client, [Subscription("market", self.market, MARKET_EVENTS),
                          Subscription("game", self.game, GAME_EVENTS),
                          Subscription("pool", self.contracts.pool, POOL_EVENTS)], self._dispatch,
            self.state_dir / "cursor.sqlite",
            FollowerSettings(poll_interval_s=self.settings.poll_interval_s, confirmations=self.settings.confirmations),
            check_chain=self.chain.confirm,
        )
        self.metrics.serve(self.settings.metrics_port)
        log.info("%s running", self.role, extra={"address": self.address, "device": self.device,
                                                 "market": self.market.address, "keeper": self.keeper is not None})

    def install_signal_handlers(self) -> None:
        def stop(signum, _frame):
            log.info("signal %d: finishing the current transaction, then stopping", signum)
            self.stop_event.set()
            self.wake.set()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)

    def run(self, *, max_ticks: int | None = None) -> None:
        """Start, then tick every ``poll_interval_s`` until stopped."""
        self.start()
        ticks = 0
        try:
            while not self.stop_event.is_set() and (max_ticks is None or ticks < max_ticks):
                ticks += 1
                started = time.monotonic()
                try:
                    self.guarded("tick", self.tick)
                except ChainChanged as changed:
                    if self.chain.wait_until_back(changed):
                        self.tick_block = None  # a full pass at once, from the persisted cursor
                        # A transaction sent as the chain changed moved a cached nonce ahead.
                        self.client.nonces.resync_all()
                    continue
                # A result the lane just finished is committed on the next tick, not a poll later.
                self.wake.wait(max(0.0, self.settings.poll_interval_s - (time.monotonic() - started)))
                self.wake.clear()
        finally:
            self.close()
        log.info("%s stopped", self.role)

    def close(self) -> None:
        self.lane.close()
        if hasattr(self, "follower"):
            self.follower.close()
        if hasattr(self, "store"):
            self.store.close()
        if hasattr(self, "chain"):
            self.chain.watch.close()
        self.book.close()
