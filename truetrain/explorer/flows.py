"""Token flows of the whole market and the conservation check, recomputed on every request.

Conservation (DESIGN.md): every token minted is held by some address (a wallet or a
contract) or was burned. The holders are everyone a ``Transfer`` ever credited, so the
sum below covers every balance there is.
"""

from __future__ import annotations

from .source import wei

ZERO = "0x" + "00" * 20


def transfers(src) -> list:
    return src.logs("token", "Transfer")


def series(logs: list, market: str, stake: str) -> list[dict]:
    """Running totals after each block with a transfer: minted, held by the market (escrow and
    credits), held by the stake manager (stakes and credits), burned."""
    held = {market: 0, stake: 0}
    minted = burned = 0
    points: dict[int, dict] = {}
    for log in logs:
        a = log["args"]
        source, target, value = a["from"], a["to"], a["value"]
        if source == ZERO:
            minted += value
        if target == ZERO:
            burned += value
        for address in (market, stake):
            held[address] += value if target == address else 0
            held[address] -= value if source == address else 0
        points[log["blockNumber"]] = {"block": log["blockNumber"], "minted": wei(minted), "market": wei(held[market]),
                                      "staked": wei(held[stake]), "burned": wei(burned)}
    return list(points.values())


def flows(src) -> dict:
    token, market, stake = src["token"], src["market"], src["stake"]
    logs = transfers(src)
    holders = sorted({log["args"]["to"] for log in logs} - {ZERO} | {market.address, stake.address})
    balances = {a: token.functions.balanceOf(a).call() for a in holders}
    minted, burned = token.functions.totalMinted().call(), token.functions.totalBurned().call()
    held = sum(balances.values())
    contracts = {market.address, stake.address}
    finalized = src.logs("market", "TaskFinalized")
    slashes = src.logs("stake", "StakeSlashed")
    return {
        "minted": wei(minted), "burned": wei(burned), "held": wei(held),
        "wallets": wei(sum(v for a, v in balances.items() if a not in contracts)),
        "holders": sum(1 for a, v in balances.items() if v and a not in contracts),
        "market_balance": wei(balances[market.address]), "escrow": wei(market.functions.totalEscrow().call()),
        "market_credits": wei(market.functions.totalCredits().call()),
        "stake_balance": wei(balances[stake.address]), "staked": wei(stake.functions.totalStaked().call()),
        "stake_credits": wei(stake.functions.totalCredits().call()),
        "escrowed_ever": wei(sum(e["args"]["escrow"] for e in src.logs("market", "JobCreated"))),
        "paid_rewards": wei(sum(e["args"]["reward"] for e in finalized)),
        "paid_audit_fees": wei(sum(e["args"]["auditFee"] for e in finalized)),
        "refunded": wei(sum(e["args"]["amount"] for e in src.logs("market", "Refunded"))),
        "slashed": wei(sum(e["args"]["slashed"] for e in slashes)),
        "slash_burned": wei(sum(e["args"]["burned"] for e in slashes)),
        "conserved": minted == held + burned,
        "series": series(logs, market.address, stake.address),
    }
