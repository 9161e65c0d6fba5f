"""The demo's closing tables: where every token of the job went, and the conservation check."""

from __future__ import annotations

from collections import defaultdict

from truetrain.cli_options import format_tokens


def token_flows(contracts, job_id: int, names: dict[str, str]) -> tuple[list[tuple[str, int]], dict]:
    """Rows (what, wei) of the job's money, from the market's events; and the totals."""
    market = contracts.market
    logs = lambda event, **f: getattr(market.events, event)().get_logs(from_block=0, argument_filters=f)  # noqa: E731
    escrow = sum(e["args"]["escrow"] for e in logs("JobCreated", jobId=job_id))
    rewards, fees, counts, audits = defaultdict(int), defaultdict(int), defaultdict(int), defaultdict(int)
    for e in market.events.TaskFinalized().get_logs(from_block=0):
        if e["args"]["taskId"] >> 64 != job_id:
            continue
        rewards[e["args"]["worker"]] += e["args"]["reward"]
        counts[e["args"]["worker"]] += 1
        if e["args"]["auditFee"]:
            fees[e["args"]["auditor"]] += e["args"]["auditFee"]
            audits[e["args"]["auditor"]] += 1
    refunded = sum(e["args"]["amount"] for e in logs("Refunded", jobId=job_id))
    penalties = sum(e["args"]["penalty"] for e in market.events.TaskTimedOut().get_logs(from_block=0)
                    if e["args"]["taskId"] >> 64 == job_id)
    rows = [("escrowed by the submitter", escrow)]
    rows += [(f"reward to {names.get(a, a)} ({counts[a]} tasks)", v) for a, v in sorted(rewards.items(), key=lambda x: names.get(x[0], x[0]))]
    rows += [(f"audit fees to {names.get(a, a)} ({audits[a]} audits)", v) for a, v in sorted(fees.items())]
    rows.append(("refunded to the submitter (audit fees not used)", refunded))
    left = escrow - sum(rewards.values()) - sum(fees.values()) - refunded
    rows.append(("left in escrow", left))
    if penalties:
        rows.append(("penalties taken from late workers (burned: paid to nobody)", penalties))
    return rows, {"escrow": escrow, "rewards": dict(rewards), "fees": dict(fees), "refunded": refunded,
                  "left": left, "penalties": penalties}


def balances(contracts, accounts: dict[str, str], others: list[str]) -> tuple[list[tuple], bool, tuple]:
    """Rows (name, wallet, staked, credits) of ``accounts``; whether minted == held + burned,
    where held counts ``accounts``, ``others`` (every other funded account) and the contracts."""
    token, stake, market = contracts.token, contracts.stake, contracts.market
    rows = []
    for name, address in accounts.items():
        info = stake.functions.stakeOf(address).call()
        rows.append((name, token.functions.balanceOf(address).call(), info[0] + info[2],
                     market.functions.credits(address).call()))
    minted = token.functions.totalMinted().call()
    burned = token.functions.totalBurned().call()
    holders = sorted(set(accounts.values()) | set(others)) + [c.address for c in (stake, market)]
    held = sum(token.functions.balanceOf(a).call() for a in holders)
    return rows, minted == held + burned, (minted, held, burned)


def print_flows(rows: list[tuple[str, int]]) -> None:
    width = max(len(r[0]) for r in rows)
    for what, wei in rows:
        print(f"    {what:<{width}}  {format_tokens(wei):>10} TRAIN")
