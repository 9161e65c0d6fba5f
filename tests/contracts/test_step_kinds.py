"""The kind contracts past StepKindsCore / StepKindsXent (contracts/numerics/StepKindsQuant.sol,
StepKindsNorm.sol, StepKindsOptim.sol, StepKindsData.sol) through StepGame's dispatch: for every
newly registered kind (and a second output of the multi-output ones) a one-entry step game on
real engine tensors (seeded, tests/contracts/step_kinds_cases.py) is played to its one-step
twice: the honest defender's element is the chain's (the defender wins), the faulty
defender's (one element's significand top bit flipped) is not (the challenger wins); the
chain's element equals the engine's and the numerics reference's bit for bit. Then each new
revert path by its error's name, and the contracts' bytecode headroom."""

from __future__ import annotations

import brownie
import numpy as np
import pytest

from tests.contracts.step_game_play import drive
from tests.contracts.step_kinds_cases import all_cases
from tests.contracts.step_kinds_play import deployment, kind_game, kind_id
from truetrain.hashing import keccak256
from truetrain.trace.game import CHALLENGER, DEFENDER
from truetrain.trace.kind_names import CONTRACTS, KINDS

NEW = ("StepKindsQuant", "StepKindsNorm", "StepKindsOptim", "StepKindsData")
CASES = all_cases()
ZERO = "0x" + "00" * 32


@pytest.fixture(scope="module")
def kinds(StepKindsCore, StepKindsXent, StepKindsQuant, StepKindsNorm, StepKindsOptim, StepKindsData, deployer):
    return {c._name: c.deploy({"from": deployer})
            for c in (StepKindsCore, StepKindsXent, StepKindsQuant, StepKindsNorm, StepKindsOptim, StepKindsData)}


@pytest.fixture(scope="module")
def game(StepGame, kinds, deployer):
    ids, contracts = deployment()
    return StepGame.deploy(ids, [kinds[c] for c in contracts], {"from": deployer})


@pytest.fixture(scope="module")
def probe(StepGameProbe, deployer):
    return StepGameProbe.deploy({"from": deployer})


def test_everyKindRegistered(game, kinds):
    for contract, names in CONTRACTS.items():
        for k in names:
            assert game.verifierOf(kind_id(k)) == kinds[contract].address, k
    assert set(KINDS) == {k for names in CONTRACTS.values() for k in names}  # the one table, all registered


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_oneStep_elementIsTheEngines_wrongClaimLoses(game, probe, alice, bob, case):
    numel = case.out.numel()
    element = int(np.random.default_rng(len(case.name)).integers(numel))
    kg = kind_game(case.kind, case.inputs, case.out, case.attrs, case.output, element)
    want = kg.want()
    assert want == int(np.asarray(case.reference).reshape(-1)[element])  # the engine's element is the reference's
    for faulty_role in (CHALLENGER, DEFENDER):
        parties = (kg.honest, kg.faulty) if faulty_role == CHALLENGER else (kg.faulty, kg.honest)
        gid = game.open(kg.setup(alice, bob, *parties, probe), {"from": alice}).return_value
        moves = drive(game, gid, parties, (alice, bob))
        tx = brownie.history[-1]
        assert tx.fn_name == "oneStep" and moves[-1].function == "oneStep"
        resolved = tx.events["GameResolved"]
        assert resolved["value"] == want  # the chain's element: the honest one, bit for bit
        assert resolved["reason"] == (0 if faulty_role == CHALLENGER else 1)
        assert probe.winnerOf(gid) == (alice, bob)[1 - faulty_role]
        assert tx.gas_used < 10_000_000


def _entry(kind: str, shape=(4,), attrs=(), dims=(1, 4), inputs=1, output=0):
    return (keccak256(kind.encode()), output, 1, list(shape), list(range(inputs)), list(attrs), list(dims))


def _t(rows=1, cols=4):
    return (ZERO, rows, cols)


def test_unknownKind_reverts(kinds):
    for c in NEW:
        with brownie.reverts(f"StepKindUnknown: {keccak256(b'conv')}"):
            kinds[c].element(_entry("conv"), [_t()], 0, [(b"", [])])


def test_missingAttributesInputsOrOpenings_revert(kinds):
    q, n, o, d = (kinds[c] for c in NEW)
    with brownie.reverts("StepKindAttributes: 1, 0"):
        q.element(_entry("row_scales"), [_t(), _t(0, 0)], 0, [(b"", [])] * 2)
    with brownie.reverts("StepKindArity: 3, 2, 2"):
        q.element(_entry("weight_grad", attrs=[2]), [_t(), _t(0, 0)], 0, [(b"", [])] * 2)
    with brownie.reverts("StepKindAttributes: 4, 2"):  # limbs, scale, a_part, b_part
        q.element(_entry("bmm", attrs=[2, 0]), [_t()] * 3, 0, [(b"", [])] * 3)
    with brownie.reverts("StepKindAttributes: 1, 0"):
        n.element(_entry("layernorm_backward"), [_t()] * 4, 0, [(b"", [])] * 4)
    with brownie.reverts("StepKindArity: 7, 5, 7"):
        o.element(_entry("adam", attrs=[0] * 7), [_t()] * 5, 0, [(b"", [])] * 7)
    with brownie.reverts("StepKindAttributes: 4, 3"):
        o.element(_entry("diloco", attrs=[0, 0, 0]), [_t()] * 3, 0, [(b"", [])] * 3)
    with brownie.reverts("StepKindAttributes: 4, 3"):  # a list whose length runs past the words
        o.element(_entry("fedavg", attrs=[3, 1, 1]), [_t()] * 4, 0, [(b"", [])] * 4)
    with brownie.reverts("StepKindAttributes: 4, 3"):  # dropout: the site [1, "a"], then p and first
        d.element(_entry("dropout", attrs=[1, 97, 0]), [_t()] * 3, 0, [(b"", [])] * 3)
    with brownie.reverts("StepKindAttributes: 5, 4"):  # pool's shape is four numbers
        d.element(_entry("pool", attrs=[3, 2, 2, 1]), [_t()] * 5, 0, [(b"", [])] * 5)


def test_shapesThatDoNotFit_revert(kinds):
    q, o = kinds["StepKindsQuant"], kinds["StepKindsOptim"]
    s = _t(1, 8)  # 8 row scales: a batch of 8
    with brownie.reverts("OneStepOperandsMismatch: 0"):  # g is (M, out) with M the scales' count
        q.element(_entry("weight_grad", (4, 4), [2]), [_t(4, 4), _t(8, 4), s, _t(0, 0)], 0, [(b"", [])] * 3)
    with brownie.reverts("OneStepOperandsMismatch: 1"):
        q.element(_entry("weight_grad_transposed", (4, 4), [2]), [_t(4, 8), _t(4, 4), s, _t(0, 0)], 0, [(b"", [])] * 3)
    with brownie.reverts("OneStepShapeInvalid: 0, 5"):  # column 5 of g (8, 4)
        q.element(_entry("weight_grad", (5, 4), [2]), [_t(8, 4), _t(8, 4), s, _t(0, 0)], 20, [(b"", [])] * 3)
    with brownie.reverts("OneStepShapeInvalid: 1, 0"):  # a batched product's output has two dimensions at least
        q.element(_entry("bmm", (4,), [2, 0, 0, 0]), [_t(), _t(), _t(0, 0)], 0, [(b"", [])] * 2)
    with brownie.reverts("OneStepOperandsMismatch: 0"):  # a's 2 rows are not parts of N·M = 4 rows
        q.element(_entry("bmm", (2, 2, 2), [2, 0, 0, 0]), [_t(2, 5), _t(4, 5), _t(0, 0)], 0, [(b"", [])] * 2)
    with brownie.reverts("OneStepOperandsMismatch: 1"):  # bt's 8 rows hold 2 parts of N·P = 4: part 2 is past them
        q.element(_entry("bmm", (2, 2, 2), [2, 0, 0, 2]), [_t(4, 5), _t(8, 5), _t(0, 0)], 0, [(b"", [])] * 2)
    with brownie.reverts("OneStepOperandsMismatch: 1"):  # the operands' rows are not of one length K
        q.element(_entry("bmm", (2, 2, 2), [2, 0, 0, 1]), [_t(4, 5), _t(8, 4), _t(0, 0)], 0, [(b"", [])] * 2)
    with brownie.reverts("OneStepShapeInvalid: 8, 8"):  # element 8 of a (2, 2, 2) output
        q.element(_entry("bmm", (2, 2, 2), [2, 0, 0, 0]), [_t(4, 5), _t(4, 5), _t(0, 0)], 8, [(b"", [])] * 2)
    with brownie.reverts("OneStepShapeInvalid: 2, 16"):  # 3 ranges of 16 in 40 values: range 5 is past them
        o.element(_entry("clip_max", (6,), [16]), [_t(1, 40), _t(0, 0)], 5, [(b"", [])])
    with brownie.reverts("OneStepShapeInvalid: 0, 0"):
        o.element(_entry("clip_max", (6,), [0]), [_t(1, 40), _t(0, 0)], 0, [(b"", [])])
    with brownie.reverts("OneStepWeightsInvalid: 3, 2"):  # FedAvg: one input a weight
        o.element(_entry("fedavg", (4,), [2, 1, 1], inputs=3), [_t()] * 4, 0, [(b"", [])] * 3)
    with brownie.reverts("OneStepWeightsInvalid: 4, 1"):  # DiLoCo: theta, momentum, then one a weight
        o.element(_entry("diloco", (4,), [0, 0, 0, 1, 1], inputs=4), [_t()] * 5, 0, [(b"", [])] * 4)
    with brownie.reverts("OneStepWeightsInvalid: 2, 2"):  # weights in [1, 2^29)
        o.element(_entry("fedavg", (4,), [2, 1, 0], inputs=2), [_t()] * 3, 0, [(b"", [])] * 2)


def test_permute_severalInputs_revertsWhereTheyDoNotFit(kinds):
    """permute of several inputs (attention's dq, dk, dv): one size each, the shape their sum."""
    core = kinds["StepKindsCore"]
    attrs = [2, 2, 4, 2, 1, 0]  # shape (2, 4), perm (1, 0)
    with brownie.reverts("StepKindArity: 1, 1, 1"):  # an entry of no inputs
        core.element(_entry("permute", (4, 2), attrs, inputs=0), [_t(1, 4)], 0, [(b"", [])])
    with brownie.reverts("OneStepOperandsMismatch: 1"):
        core.element(_entry("permute", (4, 2), attrs, inputs=2), [_t(1, 4), _t(1, 5), _t(0, 0)], 0, [(b"", [])])
    with brownie.reverts("OneStepPermutationInvalid: 2, 12"):  # three inputs of 4: not a (2, 4)
        core.element(_entry("permute", (4, 2), attrs, inputs=3), [_t(1, 4)] * 3 + [_t(0, 0)], 0, [(b"", [])])
    with brownie.reverts("StepKindAttributes: 7, 6"):  # the perm list (3 items from word 3) runs past the words
        core.element(_entry("permute", (4, 2), [2, 2, 4, 3, 1, 0], inputs=2), [_t(1, 4)] * 2 + [_t(0, 0)], 0,
                     [(b"", [])])


def test_bytecodeHeadroom(StepKindsCore, StepKindsXent, StepKindsQuant, StepKindsNorm, StepKindsOptim, StepKindsData):
    for c in (StepKindsCore, StepKindsXent, StepKindsQuant, StepKindsNorm, StepKindsOptim, StepKindsData):
        assert len(c._build["deployedBytecode"]) // 2 <= 22_118, c._name
