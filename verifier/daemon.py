"""The verifier daemon: audit the tasks drawn to it, replay a sample of the others,
challenge what does not replay, and sit on referee committees.

Audit (``AuditorDrawn`` names this verifier) — ``step`` reads the task from the chain:

* Committed, audit not committed → replay the task (in the background lane,
  truetrain.daemon.lane, while the loop goes on) from its committed inputs (the same
  verified manifest, shard and start checkpoint the worker used, or the round's results
  for an aggregation task), publish the replay's checkpoints, persist root, bundle CID and
  salt, commit ``h(task, root, salt, auditor)``;
* Revealed (the worker revealed after our commit) → reveal our root; the market compares;
* later states → done: ChallengeWindow/Finalized mean the roots matched, Disputed not (then
  the audit's game is opened, by us or by the worker).

Sample (``ChallengeWindowOpened`` for a task not audited by this verifier, picked with
probability ``sample_rate`` by a hash of task id and address, so a restart picks the same
ones): replay the task while the window is open; a mismatch on a ``repro`` job is
challenged at once with the replay's root (bond = the task's collateral, from free stake).
A pipeline stage is replayed once every other stage of its group has revealed, on the
inputs they committed to sending it (truetrain.market.stage_run); pipelined jobs draw no
audits (the contracts refuse an audit rate), so sampling is how their stages are checked,
and a verifier replays all of their stages unless ``--stage-sample-rate`` says less.

A new job (``JobCreated``): a warm-up step of its model when the model compiles kernels
(truetrain.daemon.warmup), so that a later audit's clock does not pay for compiling.

Games where this verifier is the challenger are driven by
:class:`~truetrain.dispute.GameDriver` with the replay's published checkpoints. Referee
duty (``RefereesDrawn`` names it): replay the disputed interval, persist vote and salt,
commit, then reveal.
"""

from __future__ import annotations

import logging

from truetrain.daemon.base import Daemon
from truetrain.daemon.book import Entry
from truetrain.daemon.warmup import WarmUps
from truetrain.dispute import GameStatus, Vote, opening_claims, referee_vote, vote_commitment
from truetrain.hashing import keccak256
from truetrain.market import (ROLE_VERIFIER, TaskStatus, audit_commitment, compute_task, decode_task_id,
                              encode_task_id, new_salt, publish_result)
from truetrain.market.faulty import faulty_result
from truetrain.market.stage_run import publish_stage, replay_stage_task
from truetrain.market.stages import aggregation_index, group_indices

log = logging.getLogger("verifier")

AUDIT, SAMPLE, CHALLENGE, REFEREE, OPEN_GAME = "audit", "sample", "challenge", "referee", "open-game"
#: A warm-up for a new job's model (truetrain.daemon.warmup), before an audit can be drawn.
WARM = "warm-up"
#: A replay kept only for its trace (a game we opened elsewhere, e.g. with `truetrain challenge`).
TRACE = "trace"
SETTLED = {TaskStatus.CHALLENGE_WINDOW: "match", TaskStatus.FINALIZED: "match", TaskStatus.DISPUTED: "mismatch"}
ZERO = bytes(32)


class VerifierDaemon(Daemon):
    role = "verifier"
    role_bits = ROLE_VERIFIER
    #: Games and committees have clocks; audits and samples replay whole tasks (slow).
    kinds = (CHALLENGE, OPEN_GAME, REFEREE, AUDIT, SAMPLE, WARM)
    slow_kinds = frozenset({AUDIT, SAMPLE, WARM})

    def __init__(self, settings):
        super().__init__(settings)
        self.warmups = WarmUps(self)

    def on_event(self, event) -> None:
        args, me = event.args, self.address.lower()
        if event.event == "AuditorDrawn" and args["auditor"].lower() == me:
            if self.book.open(args["taskId"], AUDIT):
                log.info("audit drawn", extra={"task": str(args["taskId"]), "deadline": args["auditDeadline"]})
        elif event.event == "ChallengeWindowOpened" and self.sampled(args["taskId"]):
            self.book.open(args["taskId"], SAMPLE)
        elif event.event == "TaskDisputed" and args["auditor"].lower() == me:
            self.book.open(args["taskId"], OPEN_GAME)
        elif event.event == "DisputeOpened" and args["challenger"].lower() == me:
            self.book.open(args["gameId"], CHALLENGE)
        elif event.event == "JobCreated":
            self.book.open(args["jobId"], WARM)
        elif event.event == "RefereesDrawn" and me in (r.lower() for r in args["referees"]):
            self.book.open(args["gameId"] << 8 | args["committee"], REFEREE)
            log.info("drawn as referee", extra={"game": args["gameId"], "committee": args["committee"]})

    def sampled(self, task_id: int) -> bool:
        """Whether to replay another worker's finished task: a stage task of a split job with
        probability ``stage_sample_rate`` (all by default: nothing else checks it), any other
        with ``sample_rate``, picked by a hash of task id and address."""
        rate = self.settings.stage_sample_rate if self.reader.is_stage_task(task_id) else self.settings.sample_rate
        if rate <= 0:
            return False
        draw = int.from_bytes(keccak256(task_id.to_bytes(32, "big") + bytes.fromhex(self.address[2:]))[:8], "big")
        return draw < rate * 2**64

    def step(self, entry: Entry) -> None:
        {AUDIT: self.audit, SAMPLE: self.sample, CHALLENGE: self.play, REFEREE: self.referee,
         OPEN_GAME: self.open_audit_game, WARM: self.warm}[entry.kind](entry)

    def warm(self, entry: Entry) -> None:
        """A new job: one step of its model if it compiles kernels, before audits are drawn."""
        self.warmups.ensure(entry.task_id)
        self.book.close_entry(entry.task_id, WARM, "done")

    # --- audits and samples -------------------------------------------------------------

    def replay(self, task_id: int, kind: str, *, faulty: bool = False) -> Entry:
        """The task replayed (or, for the named false challenger, a wrong result computed)
        and published in the lane, raising :class:`~truetrain.daemon.lane.Pending` until it
        is ready; then root and bundle CID are persisted under (task, kind)."""
        # A stage's replay is of one attempt of its group, an aggregation's of one draw of it:
        # a group reset and run again, or an aggregation reset and drawn again on a redone
        # shard, is another computation, never the earlier one's value.
        root, cid = self.lane.take((task_id, kind, *self.group_attempt(task_id)),
                                   lambda: self.replay_and_publish(task_id, faulty))
        self.book.record_result(task_id, kind, root, cid, new_salt())
        return self.book.get(task_id, kind)

    def replay_and_publish(self, task_id: int, faulty: bool) -> tuple[bytes, str | None]:
        """Run in the lane: the replay's root and the CID of its published checkpoints
        (None for an aggregation task, which has no trace)."""
        if self.reader.is_stage_task(task_id):
            run = replay_stage_task(self.reader, task_id, self.store, device=self.device)
            cid, bundle = publish_stage(self.store, run, self.reader.manifest(decode_task_id(task_id)[0]))
            return bundle.root, cid
        if faulty:
            manifest = self.reader.manifest(decode_task_id(task_id)[0])
            result = faulty_result(self.reader, task_id, "flip-element", str(manifest.steps_per_task // 2),
                                   device=self.device)
            root, training = result.merkle_root, result
        else:
            computed = compute_task(self.reader, task_id, device=self.device)
            root, training = computed.root, computed.training
        cid = None
        if training is not None:
            interval = self.reader.manifest(decode_task_id(task_id)[0]).checkpoint_interval
            cid, _ = publish_result(self.store, task_id, training, interval)
        return root, cid

    def audit(self, entry: Entry) -> None:
        task = self.reader.task(entry.task_id)
        ident = {"task": str(entry.task_id)}
        if not task.is_auditor(self.address):
            self.book.close_entry(entry.task_id, AUDIT, "lost", f"task is {task.status.name}, auditor {task.auditor}")
            return
        if task.status in SETTLED:
            outcome = SETTLED[task.status]
            self.metrics.audits.labels(AUDIT, outcome).inc()
            self.book.close_entry(entry.task_id, AUDIT, "done", outcome)
            log.log(logging.INFO if outcome == "match" else logging.WARNING, "audit settled: %s", outcome, extra=ident)
            return
        market = self.market.functions
        if task.status == TaskStatus.COMMITTED and not task.audit_committed:
            if entry.root is None or entry.salt is None:
                entry = self.replay(entry.task_id, AUDIT)
            self.send("commitAudit", market.commitAudit(entry.task_id, audit_commitment(entry.task_id, entry.root, entry.salt, self.address)))
        elif task.status == TaskStatus.REVEALED and task.audit_committed and not task.audit_revealed:
            self.send("revealAudit", market.revealAudit(entry.task_id, entry.root, entry.salt))

    def sample(self, entry: Entry) -> None:
        task = self.reader.task(entry.task_id)
        if task.is_auditor(self.address) or task.is_worker(self.address):
            self.book.close_entry(entry.task_id, SAMPLE, "done", "own task")
            return
        if task.status != TaskStatus.CHALLENGE_WINDOW:
            self.book.close_entry(entry.task_id, SAMPLE, "done", f"window closed ({task.status.name})")
            return
        # The named false challenger lies about training tasks only (an aggregation has no trace to fake).
        false_challenger = "false-challenge" in self.faults and task.index < self.reader.job(task.job_id).shards
        if entry.root is None and self.reader.is_stage_task(entry.task_id) and not self.group_revealed(task):
            return  # its inputs are what the other stages committed to: wait for their reveals
        if entry.root is None:
            entry = self.replay(entry.task_id, SAMPLE, faulty=false_challenger)
        outcome = "match" if entry.root == task.result else "mismatch"
        self.metrics.audits.labels(SAMPLE, outcome).inc()
        level = logging.INFO if outcome == "match" else logging.WARNING
        log.log(level, "sampled replay: %s", outcome, extra={"task": str(entry.task_id), "root": "0x" + entry.root.hex(),
                                                             "revealed": "0x" + task.result.hex()})
        if outcome == "mismatch" and self.reader.manifest(task.job_id).repro and not self.challenged_before(task):
            self.challenge(entry, false_challenger)
        self.book.close_entry(entry.task_id, SAMPLE, "done", outcome)

    def group_attempt(self, task_id: int) -> tuple:
        """The blocks the stages of a stage task's group were last offered in; an aggregation
        task's own offer block (it is drawn anew whenever a shard result it reads changes);
        () for other tasks."""
        if not self.reader.is_stage_task(task_id):
            job_id, _, index = decode_task_id(task_id)
            return (self.reader.offered_block(task_id),) if index == aggregation_index(self.reader.manifest(job_id)) else ()
        job_id, round_index, index = decode_task_id(task_id)
        return tuple(self.reader.offered_block(encode_task_id(job_id, round_index, i))
                     for i in group_indices(self.reader.manifest(job_id), index))

    def group_revealed(self, task) -> bool:
        """Whether every other stage of a stage task's group has revealed its result."""
        manifest = self.reader.manifest(task.job_id)
        return all(self.reader.current_reveal(encode_task_id(task.job_id, task.round, i)) is not None
                   for i in group_indices(manifest, task.index) if i != task.index)

    def challenged_before(self, task) -> bool:
        """Whether we challenged this very result before (we lost: it got its window back).
        One challenge a result: a lost one is not repeated; a task redone since has a new one."""
        game_id = self.game.functions.gameOfTask(task.task_id).call()
        if game_id == 0:
            return False
        game = self.game_view(game_id)
        return game.challenger.lower() == self.address.lower() and game.worker_root == task.result

    def challenge(self, entry: Entry, false_challenger: bool) -> None:
        """Open a dispute game on the task with our replay's root and opening claims."""
        if false_challenger:
            log.warning("fault: challenging with a wrong root", extra={"task": str(entry.task_id)})
        claims = []
        if entry.cid is not None:  # a training task: claims from our published checkpoints
            hashes, cids = self.bundle_trace(entry.cid, entry.root)
            claims = [c.as_tuple() for c in opening_claims(hashes, cids)]
        self.send("challenge", self.game.functions.challenge(entry.task_id, entry.root, claims))
        log.warning("challenged", extra={"task": str(entry.task_id), "root": "0x" + entry.root.hex()})

    # --- disputes -----------------------------------------------------------------------

    def play(self, entry: Entry) -> None:
        """Drive a game where we are the challenger, from the replay we published."""
        if "stall-dispute" in self.faults:
            return

        def trace():
            game = self.game_view(entry.task_id)
            mine = next((e for e in (self.book.get(game.task_id, k) for k in (AUDIT, SAMPLE, TRACE))
                         if e is not None and e.cid is not None and e.root == game.challenger_root), None)
            if mine is None:  # not replayed here (yet): the replay is deterministic, do it now
                self.book.open(game.task_id, TRACE)
                mine = self.replay(game.task_id, TRACE)
            return self.bundle_trace(mine.cid, game.challenger_root)

        outcome = self.play_game(entry.task_id, trace)
        if outcome is not None:
            self.book.close_entry(entry.task_id, CHALLENGE, "done", outcome)
            self.metrics.disputes.labels(outcome).inc()
            log.log(logging.INFO if outcome == "won" else logging.WARNING, "dispute %s", outcome,
                    extra={"game": entry.task_id})

    def referee(self, entry: Entry) -> None:
        game_id, committee = entry.task_id >> 8, entry.task_id & 0xFF
        game = self.game_view(game_id)
        if game.committee != committee or game.status not in (GameStatus.COMMITTING, GameStatus.REVEALING) \
                or "silent-referee" in self.faults:
            self.book.close_entry(entry.task_id, REFEREE, "done", f"game {game.status.name}")
            return
        seats = self.game.functions.committeeOf(game_id).call()
        seat = next(i for i, s in enumerate(seats) if s[0].lower() == self.address.lower())
        _, voted, commitment = seats[seat]
        calls = self.game.functions
        if game.status == GameStatus.COMMITTING and bytes(commitment) == ZERO:
            if entry.root is None:
                vote = referee_vote(self.reader, self.game, game, device=self.device)
                if "lying-referee" in self.faults:
                    vote = Vote.CHALLENGER if vote == Vote.WORKER else Vote.WORKER
                    log.warning("fault: voting %s", vote.name, extra={"game": game_id})
                self.book.record_result(entry.task_id, REFEREE, bytes([vote]), None, new_salt())
                entry = self.book.get(entry.task_id, REFEREE)
                log.info("referee vote: %s", Vote(entry.root[0]).name, extra={"game": game_id})
            self.send("commitVote", calls.commitVote(game_id, seat, vote_commitment(game_id, entry.root[0], entry.salt,
                                                                                   self.address)))
        elif game.status == GameStatus.REVEALING and bytes(commitment) != ZERO and voted == 0 and entry.salt:
            self.send("revealVote", calls.revealVote(game_id, seat, entry.root[0], entry.salt))
            self.book.close_entry(entry.task_id, REFEREE, "done", Vote(entry.root[0]).name)
