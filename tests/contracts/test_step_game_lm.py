"""The LM's program through StepGame's dispatch: for each distinct kind of the program of a
small LM (the smallest widths the manifest allows: d 8, d_ff 8, one layer; two heads, seq 4,
batch 2, dropout, AdamW clipped), one entry of a real trace (step 0) played one-entry style
(tests/contracts/step_kinds_play.py's ``entry_game``: the entry's kind, attributes, output and
descriptors as the program derives them, its inputs the trace's tensors): the honest defender
wins with the chain's element equal to the trace's, a defender with one bit flipped loses."""

from __future__ import annotations

import brownie
import numpy as np
import pytest

from tests.contracts.step_game_play import drive
from tests.contracts.step_kinds_play import deployment, entry_game
from tests.training.conftest import data_ref
from truetrain.trace import build_trace, derive, step_scalars
from truetrain.trace.game import CHALLENGER, DEFENDER
from truetrain.training import build_manifest, task_start
from truetrain.training.text import demo_corpus, encode_text_shard

SMALLEST = {"kind": "lm", "d_model": 8, "d_ff": 8, "n_layers": 1, "n_heads": 2, "seq_len": 4, "dropout": 0.1}
#: the entry played for a kind with several kinds of entries (the first one else)
CHOSEN = {"permute": "blocks.0.qkv gradient", "bmm": "blocks.0.dq"}


@pytest.fixture(scope="module")
def lm():
    shard = encode_text_shard(demo_corpus(2_000))
    ref = data_ref(shard)
    manifest = build_manifest(name="game-lm", seed=5, numeric_mode="repro", model=SMALLEST,
                              optimizer={"kind": "adamw", "lr": 0.004, "warmup_steps": 2, "clip_norm": 1.0},
                              batch_size=2, steps_per_task=4, checkpoint_interval=2, rounds=1, shards=[ref],
                              test_set=ref)
    ckpt = task_start(manifest, None, 0, 0)
    program = derive(manifest, **step_scalars(manifest, ckpt))
    return program, build_trace(manifest, shard, ckpt, keep=True)


def _entries(program) -> dict[str, int]:
    out: dict[str, int] = {}
    for t, app in enumerate(program.entries):
        if app.kind not in out or CHOSEN.get(app.kind) == app.label:
            out[app.kind] = t
    return out


KINDS = ["embedding", "add", "dropout", "layernorm", "linear", "permute", "bmm", "softmax_row_sum", "softmax",
         "gelu", "xent_partial_sum", "xent_loss", "xent_grad", "row_scales", "weight_grad_transposed", "column_sum",
         "gelu_backward", "layernorm_backward", "softmax_backward", "scatter", "clip_max", "clip_sum", "clip_factor",
         "adam_powers", "adam", "increment"]


@pytest.fixture(scope="module")
def game(StepGame, StepKindsCore, StepKindsXent, StepKindsQuant, StepKindsNorm, StepKindsOptim, StepKindsData,
         deployer):
    kinds = {c._name: c.deploy({"from": deployer})
             for c in (StepKindsCore, StepKindsXent, StepKindsQuant, StepKindsNorm, StepKindsOptim, StepKindsData)}
    ids, contracts = deployment()
    return StepGame.deploy(ids, [kinds[c] for c in contracts], {"from": deployer})


@pytest.fixture(scope="module")
def probe(StepGameProbe, deployer):
    return StepGameProbe.deploy({"from": deployer})


def test_everyKindOfTheProgram_isPlayed(lm):
    program = lm[0]
    chosen = _entries(program)
    assert sorted(chosen) == sorted(KINDS)
    qkv, dq = program.entries[chosen["permute"]], program.entries[chosen["bmm"]]
    assert len(qkv.inputs) == 3  # dq, dk, dv one after another into the qkv layout
    assert (dq.attrs["a_part"], dq.attrs["b_part"]) == (0, 1)  # ds against kᵀ, part 1 of the heads' transposes


@pytest.mark.parametrize("kind", KINDS)
def test_lmEntry_honestDefenderWins_oneBitFaultLoses(lm, game, probe, alice, bob, kind):
    program, trace = lm
    t = _entries(program)[kind]
    app = program.entries[t]
    element = int(np.random.default_rng(t).integers(int(np.prod(app.shape)) if app.shape else 1))
    kg = entry_game(app, [trace.tensor(r) for r in app.inputs], trace.outputs[t], element)
    for faulty_role in (CHALLENGER, DEFENDER):
        parties = (kg.honest, kg.faulty) if faulty_role == CHALLENGER else (kg.faulty, kg.honest)
        gid = game.open(kg.setup(alice, bob, *parties, probe), {"from": alice}).return_value
        moves = drive(game, gid, parties, (alice, bob))
        tx = brownie.history[-1]
        assert tx.fn_name == "oneStep" and moves[-1].function == "oneStep", (t, app.label)
        resolved = tx.events["GameResolved"]
        assert resolved["value"] == kg.want(), (t, app.label)  # the chain's element is the trace's
        assert resolved["reason"] == (0 if faulty_role == CHALLENGER else 1)
        assert probe.winnerOf(gid) == (alice, bob)[1 - faulty_role]
        assert tx.gas_used < 10_000_000
