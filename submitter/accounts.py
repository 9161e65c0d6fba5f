"""``truetrain identity`` and ``truetrain token``: who an account is and what it holds.

Every participant uses these (workers and verifiers register here too); they live with the
submitter's commands because a submitter is the first to need them.
"""

from __future__ import annotations

import json

import click

from truetrain.cli_options import (ADDRESS, CID, ROLE_BITS, Refused, emit, format_tokens, json_option, role_names,
                                   session_options)
from truetrain.errors import ContractRevert

#: Largest profile JSON `identity register --profile-cid` fetches.
MAX_PROFILE_BYTES = 64 * 1024
IDENTITY_FIELDS = ("registered", "roles", "reputation", "registered_at_block", "last_seen_block", "profile_hash",
                   "profile_cid", "capability", "history")
CAPABILITY_FIELDS = ("device_class", "memory_mib", "throughput", "region", "max_concurrent")
NETWORK_FIELDS = ("fetch_kibps", "rpc_rtt_ms", "measured_at")
HISTORY_FIELDS = ("tasks_done", "tasks_failed", "tasks_timed_out", "disputes_won", "disputes_lost", "amount_slashed",
                  "compute_contributed")


def read_identity(session, address: str) -> dict:
    """``IdentityRegistry.identityOf`` as a dict with named capability and history."""
    raw = dict(zip(IDENTITY_FIELDS, session.client.call(session.contracts.registry.functions.identityOf(address))))
    raw["capability"] = dict(zip(CAPABILITY_FIELDS, raw["capability"]))
    raw["history"] = dict(zip(HISTORY_FIELDS, raw["history"]))
    raw["profile_hash"] = "0x" + bytes(raw["profile_hash"]).hex()
    raw["role_names"] = role_names(raw["roles"]).split(", ") if raw["roles"] else []
    figures, last_timeout = session.client.call(session.contracts.registry.functions.networkOf(address))
    raw["network"] = {**dict(zip(NETWORK_FIELDS, figures)), "last_timeout_block": last_timeout}
    return {"address": address, **raw}


def _profile(session, profile_cid: str | None):
    """(CID, hash, profile dict) of the given profile on IPFS, or of this machine's, uploaded."""
    from truetrain.hashing import keccak256

    if profile_cid is not None:
        data = session.store.fetch_unverified(profile_cid, max_size=MAX_PROFILE_BYTES)
        try:
            profile = json.loads(data)
            int(profile["device_class"]), int(profile["memory_mib"])
        except (ValueError, KeyError, TypeError):
            raise Refused(f"{profile_cid} is not a hardware profile (JSON with device_class and memory_mib)") from None
        return profile_cid, keccak256(data), profile
    from truetrain.hardware import detect

    detected = detect()
    stored = session.store.add_bytes(detected.canonical_json())
    return stored.cid, stored.hash, json.loads(detected.canonical_json())


@click.group()
def identity() -> None:
    """Register and inspect participant identities."""


@identity.command("register")
@click.option("--role", "roles", type=click.Choice(sorted(ROLE_BITS)), multiple=True, required=True,
              help="A role to hold (repeat for several).")
@click.option("--profile-cid", type=CID, help="Use this hardware profile already on IPFS instead of detecting one.")
@click.option("--region", type=click.IntRange(0, 65535), default=0, show_default=True, help="Region code to declare.")
@click.option("--max-concurrent", type=click.IntRange(1, 255), default=1, show_default=True,
              help="Tasks to run at once.")
@json_option
@session_options(signing=True)
def identity_register(session, as_json, roles, profile_cid, region, max_concurrent):
    """Register the account's identity with a hardware profile (this machine's, on IPFS).

    An account already registered gains the roles it lacks.
    """
    bits = 0
    for role in roles:
        bits |= ROLE_BITS[role]
    account, registry = session.account, session.contracts.registry
    current = read_identity(session, account.address)
    if current["registered"] and current["roles"] & bits == bits:
        raise Refused(f"{account.address} is already registered with roles {role_names(current['roles'])}")
    cid, digest, profile = _profile(session, profile_cid)
    capability = (int(profile["device_class"]), int(profile["memory_mib"]), int(profile.get("throughput_gflops", 0)),
                  region, max_concurrent)
    if current["registered"]:
        session.send(registry.functions.updateProfile(cid, digest, capability))
        receipt = session.send(registry.functions.setRoles(current["roles"] | bits))
        done = f"{account.address} now holds roles {role_names(current['roles'] | bits)}"
    else:
        receipt = session.send(registry.functions.register(bits, cid, digest, capability))
        done = f"{account.address} registered with roles {role_names(bits)}"
    payload = {"address": account.address, "roles": current["roles"] | bits, "profile_cid": cid,
               "profile_hash": "0x" + digest.hex(), "capability": dict(zip(CAPABILITY_FIELDS, capability)),
               "tx": receipt.tx_hash}
    emit(payload, as_json, f"{done}; profile {cid} ({profile.get('device_name', 'device')}, "
                           f"{capability[1]:,} MiB, {capability[2]} GFLOP/s)")


@identity.command("show")
@click.argument("address", type=ADDRESS, required=False)
@json_option
@session_options(signing=True)
def identity_show(session, as_json, address):
    """Show an identity: roles, declared capability and network figures, history counters and reputation."""
    found = read_identity(session, session.address_or_own(address))
    if not found["registered"]:
        emit(found, as_json, f"{found['address']} has no identity")
        return
    cap, hist, net = found["capability"], found["history"], found["network"]
    network = (f"  network: {net['fetch_kibps']:,} KiB/s fetch, {net['rpc_rtt_ms']} ms RPC round-trip, measured at "
               f"block {net['measured_at']}" if net["measured_at"] else "  network: never declared")
    if net["last_timeout_block"]:
        network += f" (last timeout at block {net['last_timeout_block']})"
    lines = [
        f"{found['address']}: roles {role_names(found['roles'])}, reputation {found['reputation']}/10000",
        f"  registered at block {found['registered_at_block']}, last seen at block {found['last_seen_block']}",
        f"  profile {found['profile_cid']} ({found['profile_hash']})",
        f"  capability: device class {cap['device_class']}, {cap['memory_mib']:,} MiB, {cap['throughput']} GFLOP/s, "
        f"region {cap['region']}, {cap['max_concurrent']} at once",
        network,
        f"  history: {hist['tasks_done']} done, {hist['tasks_failed']} failed, {hist['tasks_timed_out']} timed out, "
        f"disputes {hist['disputes_won']} won / {hist['disputes_lost']} lost, "
        f"{format_tokens(hist['amount_slashed'])} TRAIN slashed, {hist['compute_contributed']:,} compute units",
    ]
    emit(found, as_json, "\n".join(lines))


@click.group()
def token() -> None:
    """TRAIN balances, withdrawals and the devnet faucet."""


def read_balances(session, address: str) -> dict:
    c = session.contracts
    active, locked, unbonding, ready = session.client.call(c.stake.functions.stakeOf(address))
    return {"address": address, "wallet_wei": session.balance(address), "staked_wei": active, "locked_wei": locked,
            "unbonding_wei": unbonding, "unbonding_ready_block": ready,
            "market_credits_wei": session.client.call(c.market.functions.credits(address)),
            "stake_credits_wei": session.client.call(c.stake.functions.credits(address))}


@token.command("balance")
@click.argument("address", type=ADDRESS, required=False)
@json_option
@session_options(signing=True)
def token_balance(session, as_json, address):
    """Show an account's TRAIN: wallet, stake (locked, unbonding) and withdrawable credits."""
    b = read_balances(session, session.address_or_own(address))
    unbonding = (f", {format_tokens(b['unbonding_wei'])} unbonding (ready at block {b['unbonding_ready_block']})"
                 if b["unbonding_wei"] else "")
    emit(b, as_json, f"{b['address']}: wallet {format_tokens(b['wallet_wei'])} TRAIN, staked "
                     f"{format_tokens(b['staked_wei'])} ({format_tokens(b['locked_wei'])} locked){unbonding}, credits "
                     f"{format_tokens(b['market_credits_wei'])} market + {format_tokens(b['stake_credits_wei'])} stake")


@token.command("faucet")
@json_option
@session_options(signing=True)
def token_faucet(session, as_json):
    """Draw the faucet's TRAIN (devnet tokens only, once per cooldown)."""
    account, tok = session.account, session.contracts.token
    if not session.client.call(tok.functions.devnet()):
        raise Refused(f"the token at {tok.address} is not a devnet token: it has no faucet")
    try:
        receipt = session.send(tok.functions.faucet())
    except ContractRevert as exc:
        if exc.error == "TokenFaucetCooldown":
            raise Refused(f"the faucet is cooling down for {account.address}: try again at block "
                          f"{exc.error_args[1]}") from None
        raise
    amount = session.client.call(tok.functions.FAUCET_AMOUNT())
    emit({"address": account.address, "amount_wei": amount, "wallet_wei": session.balance(account.address),
          "tx": receipt.tx_hash}, as_json,
         f"faucet gave {account.address} {format_tokens(amount)} TRAIN; wallet "
         f"{format_tokens(session.balance(account.address))} TRAIN")


@token.command("withdraw")
@json_option
@session_options(signing=True)
def token_withdraw(session, as_json):
    """Withdraw your credits (rewards, refunds, penalties) and any unbonded stake that is ready."""
    account, c = session.account, session.contracts
    b = read_balances(session, account.address)
    ready = b["unbonding_wei"] and session.client.w3.eth.block_number >= b["unbonding_ready_block"]
    if not (b["market_credits_wei"] or b["stake_credits_wei"] or ready):
        wait = (f"; {format_tokens(b['unbonding_wei'])} TRAIN unbonds at block {b['unbonding_ready_block']}"
                if b["unbonding_wei"] else "")
        raise Refused(f"{account.address} has nothing to withdraw{wait}")
    before = session.balance(account.address)
    if b["market_credits_wei"]:
        session.send(c.market.functions.withdraw())
    if b["stake_credits_wei"]:
        session.send(c.stake.functions.withdraw())
    if ready:
        session.send(c.stake.functions.withdrawUnstaked())
    gained = session.balance(account.address) - before
    emit({"address": account.address, "withdrawn_wei": gained}, as_json,
         f"withdrew {format_tokens(gained)} TRAIN to {account.address}")
