"""``truetrain worker``: stake, unstake and inspect a worker (or verifier); ``run`` the daemon.

Staking checks the identity, the balance and the allowance before sending anything, and
joins the pool in the same command so that a new worker is drawable right away.
"""

from __future__ import annotations

import click

from truetrain.cli_options import (ADDRESS, AMOUNT, ROLE_BITS, Refused, emit, format_tokens, json_option, role_names,
                                   session_options)

#: Roles the pool draws from.
POOL_ROLES = ROLE_BITS["worker"] | ROLE_BITS["verifier"]


def _stake_info(session, address: str) -> dict:
    c = session.contracts
    active, locked, unbonding, ready = session.client.call(c.stake.functions.stakeOf(address))
    joined, tasks, _ = session.client.call(c.pool.functions.memberOf(address))
    roles = session.client.call(c.registry.functions.identityOf(address))[1]
    return {"address": address, "roles": roles, "staked_wei": active, "locked_wei": locked, "free_wei": active - locked,
            "unbonding_wei": unbonding, "unbonding_ready_block": ready, "joined": joined, "active_tasks": tasks,
            "worker_weight": session.client.call(c.pool.functions.weightOf(address, False)),
            "verifier_weight": session.client.call(c.pool.functions.weightOf(address, True)),
            "market_credits_wei": session.client.call(c.market.functions.credits(address)),
            "stake_credits_wei": session.client.call(c.stake.functions.credits(address))}


@click.group()
def worker() -> None:
    """Stake, unstake, inspect and run a worker."""


@worker.command("stake")
@click.argument("amount", type=AMOUNT)
@click.option("--no-approve", is_flag=True, help="Use the existing allowance instead of approving AMOUNT.")
@json_option
@session_options(signing=True)
def worker_stake(session, as_json, amount, no_approve):
    """Stake AMOUNT TRAIN (approving exactly that) and join the worker pool if not in it yet."""
    account, c = session.account, session.contracts
    info = _stake_info(session, account.address)
    if not info["roles"] & POOL_ROLES:
        raise Refused(f"{account.address} holds no worker or verifier role "
                      f"(roles: {role_names(info['roles'])}): run `truetrain identity register --role worker` first")
    session.require_funds(account.address, amount, "staking")
    if no_approve:
        session.require_allowance(account.address, c.stake.address, amount, "staking")
    else:
        session.send(c.token.functions.approve(c.stake.address, amount))
    receipt = session.send(c.stake.functions.stake(amount))
    joined = not info["joined"]
    if joined:
        session.send(c.pool.functions.joinPool())
    after = _stake_info(session, account.address)
    emit({**after, "amount_wei": amount, "joined_now": joined, "tx": receipt.tx_hash}, as_json,
         f"staked {format_tokens(amount)} TRAIN: {format_tokens(after['staked_wei'])} staked, "
         f"{format_tokens(after['free_wei'])} free" + ("; joined the pool" if joined else ""))


@worker.command("unstake")
@click.argument("amount", type=AMOUNT)
@json_option
@session_options(signing=True)
def worker_unstake(session, as_json, amount):
    """Start unbonding AMOUNT TRAIN of free stake; `truetrain token withdraw` takes it once ready."""
    from web3.logs import DISCARD

    account, c = session.account, session.contracts
    info = _stake_info(session, account.address)
    if amount > info["free_wei"]:
        raise Refused(f"cannot unstake {format_tokens(amount)} TRAIN: {account.address} has "
                      f"{format_tokens(info['free_wei'])} free of {format_tokens(info['staked_wei'])} staked "
                      f"({format_tokens(info['locked_wei'])} locked as collateral)")
    receipt = session.send(c.stake.functions.requestUnstake(amount))
    event = c.stake.events.UnstakeRequested().process_receipt(receipt.raw, errors=DISCARD)[0]["args"]
    emit({"address": account.address, "amount_wei": amount, "unbonding_wei": event["unbonding"],
          "ready_block": event["readyAtBlock"], "tx": receipt.tx_hash}, as_json,
         f"unstaking {format_tokens(amount)} TRAIN: {format_tokens(event['unbonding'])} unbonding, "
         f"withdrawable from block {event['readyAtBlock']}")


@worker.command("status")
@click.argument("address", type=ADDRESS, required=False)
@json_option
@session_options(signing=True)
def worker_status(session, as_json, address):
    """Show a worker's stake, pool membership, active tasks and credits."""
    info = _stake_info(session, session.address_or_own(address))
    drawable = "drawable" if info["worker_weight"] or info["verifier_weight"] else "not drawable now (weight 0)"
    pool = f"in the pool, {info['active_tasks']} active task(s), {drawable}" if info["joined"] else "not in the pool"
    unbonding = (f", {format_tokens(info['unbonding_wei'])} unbonding (ready at block {info['unbonding_ready_block']})"
                 if info["unbonding_wei"] else "")
    emit(info, as_json,
         f"{info['address']} (roles {role_names(info['roles'])}): staked {format_tokens(info['staked_wei'])} TRAIN "
         f"({format_tokens(info['locked_wei'])} locked){unbonding}; {pool}; credits "
         f"{format_tokens(info['market_credits_wei'])} market + {format_tokens(info['stake_credits_wei'])} stake")


try:  # the daemon's command lands separately; staking works without it
    from worker.run import run as _run
except ImportError:
    _run = None
if _run is not None:
    worker.add_command(_run)
