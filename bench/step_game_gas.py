"""Gas of the step game (contracts/StepGame.sol): whole games on the digits MLP (an interval
of 3 steps, a fault put in one element of one application of step 1,
tests/contracts/step_game_play.py), played on a fresh Anvil through web3, the honest side
defending and then challenging. Prints each move's gas by level and function, the one-step's
per kind, and the moves against 2 · (⌈log2 steps⌉ + ⌈log2 entries⌉ + ⌈log2 leaves⌉) + 7.
Then one-entry games (tests/contracts/step_kinds_play.py) of every kind of StepKindsQuant,
Norm, Optim and Data at the models' shapes, the faulty side defending: the one-step's gas
through the dispatch.

    .venv/bin/python bench/step_game_gas.py
"""

from __future__ import annotations

import os
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from web3 import Web3  # noqa: E402

from tests.contracts.step_game_play import Setting  # noqa: E402
from tests.contracts.step_kinds_cases import bench_cases  # noqa: E402
from tests.contracts.step_kinds_play import deployment, kind_game  # noqa: E402
from truetrain.chain.artifacts import load_artifact  # noqa: E402
from truetrain.chain.devnet import free_port, start_anvil  # noqa: E402
from truetrain.trace.game import play  # noqa: E402

LIMIT = 10_000_000
FAULTS = [(0, "linear fc.0 (32x128, K 64)"), (13, "linear input gradient (32x128, K 10)"), (2, "relu mask"),
          (6, "xent gradient"), (11, "column sum"), (14, "apply_mask"), (8, "permute"), (26, "sgd parameter"),
          (10, "weight gradient fc.1 (gT, aT rows; M 32)")]


def _deploy(w3, name, *args):
    art = load_artifact(name)
    tx = w3.eth.contract(abi=art.abi, bytecode=art.bytecode).constructor(*args).transact({"from": w3.eth.accounts[0]})
    return w3.eth.contract(address=w3.eth.wait_for_transaction_receipt(tx).contractAddress, abi=art.abi)


def _game(w3, game, setting, parties, accounts):
    fn = game.functions.open(setting.setup(*[type("A", (), {"address": a}) for a in accounts], *parties,
                                           "0x" + "00" * 20))
    w3.eth.wait_for_transaction_receipt(fn.transact({"from": accounts[0]}))
    gid = game.functions.gameCount().call()

    def send(turn, name, args):
        fn = getattr(game.functions, name)(gid, *args)
        receipt = w3.eth.wait_for_transaction_receipt(fn.transact({"from": accounts[turn], "gas": 29_000_000}))
        if receipt.status != 1:
            try:  # the reason: the same call on the state before
                fn.call({"from": accounts[turn], "gas": 29_000_000}, block_identifier=receipt.blockNumber - 1)
            except Exception as exc:  # noqa: BLE001 (reported)
                raise RuntimeError(f"{name} reverted: {exc!r}") from None
            raise RuntimeError(f"{name} reverted ({receipt.gasUsed:,} gas)")
        return receipt

    return play(parties, lambda: game.functions.status(gid).call(), lambda: game.functions.disputed(gid).call(),
                send, lambda r: r.gasUsed)


def main() -> None:
    setting = Setting()
    devnet = start_anvil(int(os.environ.get("TT_ANVIL_PORT", 0)) or free_port())
    try:
        w3 = Web3(Web3.HTTPProvider(devnet.url, request_kwargs={"timeout": 120}))
        ids, names = deployment()
        contracts = {n: _deploy(w3, n).address for n in dict.fromkeys(names)}
        game = _deploy(w3, "StepGame", ids, [contracts[n] for n in names])
        accounts = w3.eth.accounts[1:3]
        by_move, one_steps, worst = defaultdict(list), [], 0
        for t, what in FAULTS:
            for honest_defends in (True, False):
                honest, faulty = setting.honest(), setting.faulty(t, 5)
                parties = (honest, faulty) if honest_defends else (faulty, honest)
                moves = _game(w3, game, setting, parties, accounts)
                assert len(moves) == setting.expected_moves(t), (t, len(moves))
                for m in moves[:-1]:
                    by_move[(m.level, m.function, "defender" if m.party == 0 else "challenger")].append(m.gas)
                one_steps.append((what, "defender" if honest_defends else "challenger", len(moves), moves[-1].gas))
                worst = max(worst, *(m.gas for m in moves))
        print("| level | move | by | txs | gas min | gas max |\n|---|---|---|---|---|---|")
        for (level, fn, who), gas in sorted(by_move.items()):
            print(f"| {level} | {fn} | {who} | {len(gas)} | {min(gas):,} | {max(gas):,} |")
        print("\n| fault in | honest side | moves | one-step tx gas | of 10 M |\n|---|---|---|---|---|")
        for what, who, n, gas in one_steps:
            print(f"| {what} | {who} | {n} | {gas:,} | {100 * gas / LIMIT:.1f} % |")
        print("\n| model | kind | output | moves | one-step tx gas | of 10 M |\n|---|---|---|---|---|---|")
        for model, case in bench_cases():
            kg = kind_game(case.kind, case.inputs, case.out, case.attrs, case.output, 0)
            moves = _game(w3, game, kg, (kg.faulty, kg.honest), accounts)
            worst = max(worst, *(m.gas for m in moves))
            gas = moves[-1].gas
            shape = "x".join(map(str, case.out.shape)) or "scalar"
            print(f"| {model} | {case.label or case.name} | {shape} | {len(moves)} | {gas:,} | {100 * gas / LIMIT:.1f} % |")
        print(f"\nmoves = 2 * (ceil log2 steps + ceil log2 entries + ceil log2 leaves) + 7 in every game; "
              f"largest transaction {worst:,} gas ({'within' if worst <= LIMIT else 'OVER'} the 10 M limit)")
    finally:
        devnet.stop()


if __name__ == "__main__":
    main()
