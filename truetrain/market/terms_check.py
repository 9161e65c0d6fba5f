"""A job's terms checked as JobMarket.createJob checks them (JobBook.create), by flag name.

``truetrain job submit`` runs these before it asks any node for anything, so a term the
market would refuse is one line naming the flag to change, and no ``approve`` is ever
mined for a job that cannot be created. The bounds are the market's constants (a test pins
them to the deployed contract's); only the expiry is stricter than the contract, which
refuses an expiry block already reached: a job must outlive one task's windows.
"""

from __future__ import annotations

from truetrain.cli_options import format_tokens as _tokens
from truetrain.errors import ConfigError

from .jobs import (
    MAX_COLLATERAL_PER_REWARD, MAX_REVEAL_WINDOW_BLOCKS, MIN_COLLATERAL, MIN_WINDOW_BLOCKS, JobTerms,
)

#: IJobMarket.MAX_CID_BYTES: the longest manifest or checkpoint CID the market stores.
MAX_CID_BYTES = 128
#: IJobMarket.MAX_STAGES: the most stages a job's model may be split into.
MAX_STAGES = 8
#: Escrow.BPS: an audit rate is at most 100 % (10,000 basis points).
MAX_AUDIT_RATE_BPS = 10_000


def check_money(terms: JobTerms) -> None:
    """A nonzero reward; a collateral in [max(reward, MIN_COLLATERAL), 100 x reward]."""
    reward, collateral = terms.reward_per_task, terms.worker_collateral
    if reward <= 0:
        raise ConfigError("--reward must be more than 0 TRAIN: a job pays its tasks")
    if collateral < MIN_COLLATERAL:
        raise ConfigError(f"--collateral {_tokens(collateral)} TRAIN is below the market's least, "
                          f"{_tokens(MIN_COLLATERAL)} TRAIN (a challenger bonds as much)")
    if collateral < reward:
        raise ConfigError(f"--collateral {_tokens(collateral)} TRAIN is below --reward {_tokens(reward)} "
                          f"TRAIN: a worker must stake more than a wrong result could earn it")
    if collateral > reward * MAX_COLLATERAL_PER_REWARD:
        raise ConfigError(f"--collateral {_tokens(collateral)} TRAIN is more than {MAX_COLLATERAL_PER_REWARD} x "
                          f"--reward {_tokens(reward)} TRAIN: raise --reward or lower --collateral")


def check_windows(terms: JobTerms) -> None:
    """Each window at least MIN_WINDOW_BLOCKS, the reveal window at most
    MAX_REVEAL_WINDOW_BLOCKS, the challenge window at least the compute window, and the job
    alive for at least one task's windows."""
    windows = (("--accept-window", terms.accept_window), ("--compute-window", terms.compute_window),
               ("--reveal-window", terms.reveal_window), ("--challenge-window", terms.challenge_window))
    for flag, blocks in windows:
        if blocks < MIN_WINDOW_BLOCKS:
            raise ConfigError(f"{flag} {blocks} is shorter than the market's least window, {MIN_WINDOW_BLOCKS} blocks")
    if terms.reveal_window > MAX_REVEAL_WINDOW_BLOCKS:
        raise ConfigError(f"--reveal-window {terms.reveal_window} is longer than {MAX_REVEAL_WINDOW_BLOCKS} blocks "
                          f"(the audit draw's block hash must stay readable until it ends)")
    if terms.challenge_window < terms.compute_window:
        raise ConfigError(f"--challenge-window {terms.challenge_window} is shorter than --compute-window "
                          f"{terms.compute_window}: a third party must be able to re-run a task and challenge it")
    task_life = sum(blocks for _, blocks in windows)
    if terms.expiry_blocks < task_life:
        raise ConfigError(f"--expiry-blocks {terms.expiry_blocks} is shorter than one task's windows "
                          f"(accept {terms.accept_window} + compute {terms.compute_window} + reveal "
                          f"{terms.reveal_window} + challenge {terms.challenge_window} = {task_life} blocks): "
                          f"the job would expire before a task could be final")


def check_shape(terms: JobTerms, stages: int) -> None:
    """An audit rate within 100 %; 1 to MAX_STAGES stages, and no drawn audits when split."""
    if not 0 <= terms.audit_rate_bps <= MAX_AUDIT_RATE_BPS:
        raise ConfigError(f"--audit-rate {terms.audit_rate_bps / 10_000:g} is not a share between 0 and 1")
    if not 1 <= stages <= MAX_STAGES:
        raise ConfigError(f"--stages {stages} is not between 1 and {MAX_STAGES}")
    if stages > 1 and terms.audit_rate_bps:
        raise ConfigError("a job split into stages is checked by sampling verifiers, not by drawn audits "
                          "(a stage's inputs are its neighbours' results): give --audit-rate 0")


def check_terms(terms: JobTerms, stages: int = 1) -> None:
    """Refuse, naming the flag, every term JobMarket.createJob would refuse."""
    check_money(terms)
    check_windows(terms)
    check_shape(terms, stages)


def check_cid(cid: str, what: str) -> None:
    """Refuse a CID longer than the market stores (a node configured for long CIDs)."""
    if len(cid.encode()) > MAX_CID_BYTES:
        raise ConfigError(f"the {what} CID {cid} is {len(cid.encode())} bytes, more than the {MAX_CID_BYTES} the "
                          f"market stores: use an IPFS node that makes CIDv0 or base32 CIDv1")
