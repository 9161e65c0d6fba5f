"""Pipelined jobs across processes (issue 17): each stage in its own OS process, messages
on a real IPFS dev node (Helia), addresses on a rendezvous directory. Three stage
processes give the single-process task's checkpoints bit for bit; a blob that does not
match its address, or that the node never got, fails the receiving stage with
PipelineError naming the address, within the timeouts; the manifest's ``pipeline`` field
is refused where it cannot run."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest
import torch

from tests.ipfs_nodes import client_for, free_port
from truetrain.errors import ManifestError, PipelineError
from truetrain.hashing import keccak256, to_hex32
from truetrain.storage import start_devnode, stop_devnode
from truetrain.training import DataRef, build_manifest, load_manifest, run_task
from truetrain.training.memory import RUNTIME_MIB, stage_memory_mib, training_memory_mib
from truetrain.training.pipeline import (IpfsMessageStore, Kind, Message, Rendezvous, StageJob, broken_links,
                                         log_root, merge_results, result_log, run_pipeline_task, run_stages,
                                         split_at, split_by_params)
from truetrain.training.text import demo_corpus, encode_text_shard, split_text

LM = {"kind": "lm", "d_model": 32, "n_layers": 2, "n_heads": 2, "seq_len": 16, "dropout": 0.1}
ADAMW = {"kind": "adamw", "lr": 0.003, "warmup_steps": 1, "clip_norm": 0.05}  # clips every step
PIPE = {"stages": 3, "split": "params", "micro_batches": 2}


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    started = start_devnode(tmp_path_factory.mktemp("pipe-node"), free_port())
    yield started
    stop_devnode(started.pid)


@pytest.fixture(scope="module")
def job(node):
    """(manifest, shard bytes, the manifest's DataRef on the node, run_task's checkpoint hashes)."""
    shards, held = split_text(demo_corpus(20_000), 1, seq_len=16)
    blob, test = encode_text_shard(shards[0]), encode_text_shard(held)
    with client_for(node) as client:
        refs = [client.add_bytes(b) for b in (blob, test)]
        manifest = build_manifest(
            name="pipe-ipfs", seed=11, model=LM, optimizer=ADAMW, batch_size=4, steps_per_task=3,
            checkpoint_interval=1, rounds=1, pipeline=PIPE,
            shards=[{"cid": refs[0].cid, "hash": to_hex32(refs[0].hash), "samples": len(shards[0])}],
            test_set={"cid": refs[1].cid, "hash": to_hex32(refs[1].hash)})
        stored = client.add_bytes(manifest.to_bytes())
    return manifest, blob, DataRef(stored.cid, stored.hash), run_task(manifest, blob, None, 0, 0).checkpoint_hashes


def test_threeStageProcesses_overIpfs_equalSingleProcessBitForBit(job, node, tmp_path):
    manifest, blob, ref, want = job
    jobs = [StageJob(ref, s, node.api_addr, str(tmp_path / "board"), timeout_s=30) for s in range(3)]
    records = run_stages(jobs, deadline_s=120)
    with client_for(node) as client:
        merged = merge_results(client, records)
    assert [c.hash() for c in merged] == want and len(want) == 4  # steps 0..3
    logs = [result_log(r) for r in records]
    assert broken_links(logs) == []
    # the same messages, addresses and roots as the stages taking turns in one process
    plan = split_by_params(manifest.model, 3)
    assert manifest.pipeline.plan(manifest.model) == plan and plan.starts == (0, 1, 2)
    inproc = run_pipeline_task(manifest, blob, None, 0, 0, plan, micro_batches=2)
    assert inproc.checkpoint_hashes == want
    assert [r["log_root"] for r in records] == ["0x" + log_root(log, 3).hex() for log in inproc.logs]
    assert [r["log_root"] for r in records] == ["0x" + log_root(log, 3).hex() for log in logs]
    moved: dict[str, int] = {}
    for r in records:
        for kind, n in r["moved"].items():
            moved[kind] = moved.get(kind, 0) + n
    assert moved == {k.name: n for k, n in inproc.store.moved.items()}
    sent = {e.hash for log in logs for e in log.entries if e.sent and e.kind != Kind.CHECKPOINT}
    assert len(sent) == 3 * (2 * 2 + 2 * 2 + 2 + 3 + 3)  # per step: ACT, GRAD, TIED, NORM_MAX, NORM_SUM
    assert all("0x" + a.hex() in records[e_stage]["cids"] for e_stage, log in enumerate(logs)
               for a in (e.hash for e in log.entries if e.kind != Kind.CHECKPOINT))


def _raw_cid(data: bytes) -> str:
    """The CIDv1 (raw codec, sha2-256) of ``data``: what a node would call it, were it added."""
    return "b" + base64.b32encode(bytes([1, 0x55, 0x12, 0x20]) + hashlib.sha256(data).digest()).decode().lower().rstrip("=")


def _act(rows: int) -> Message:
    return Message(Kind.ACT, 0, 0, 0, {"x": torch.zeros(rows, 16, 32)})


def test_blobNotMatchingItsAddress_refusedNamingTheAddress(node):
    genuine = _act(2).to_bytes()
    address = keccak256(genuine)
    corrupt = bytearray(genuine)
    corrupt[-1] ^= 1
    with client_for(node) as client:
        cid = client.add_bytes(bytes(corrupt)).cid
        store = IpfsMessageStore(client, timeout_s=5)
        with pytest.raises(PipelineError, match=f"^no CID known for message 0x{address.hex()}$"):
            store.get(address)
        store.learn(address, cid)
        expected = (f"message at 0x{address.hex()} does not match its address: content {cid} ({len(genuine)} "
                    f"bytes) hashes to {to_hex32(keccak256(bytes(corrupt)))}, expected {to_hex32(address)}: "
                    f"refusing it")
        with pytest.raises(PipelineError, match=f"^{re.escape(expected)}$"):
            store.get(address)
        with pytest.raises(PipelineError, match=f"^message 0x{address.hex()}: not a CID: 'nope'"):
            store.learn(address, "nope")
        good = store.put(_act(2))
        assert good == address and store.get(address).tensors["x"].shape == (2, 16, 32)


def test_withheldBlob_receivingStageFailsNamingTheAddress_noHang(job, node, tmp_path):
    manifest, _, ref, _ = job
    act = _act(2)  # what stage 0 would send stage 1 first, never added to the node
    address = keccak256(act.to_bytes())
    board = Rendezvous(tmp_path / "board")
    board.post("msg-0-act-0-0", {"address": "0x" + address.hex(), "cid": _raw_cid(act.to_bytes())})
    # stage 1 gives up on the blob after 3 s; stage 2, waiting on stage 1, would after 20 s
    jobs = [StageJob(ref, s, node.api_addr, str(board.root), timeout_s=t) for s, t in ((1, 3), (2, 20))]
    with pytest.raises(PipelineError) as caught:
        run_stages(jobs, deadline_s=60, grace_s=5)
    head = f"stage 1: PipelineError: message at 0x{address.hex()} could not be fetched: "
    assert str(caught.value).startswith(head), str(caught.value)
    # stage 2 waited for stage 1's activations and gave up on the abort, not on a hang (a
    # stage that hung would be killed at the deadline and post no error: no wall-clock bound
    # here, which a loaded machine overran, 33 s for a 30 s bound)
    assert board.read("error-2") == {"error": f"PipelineError: gave up waiting for ACT of step 0, micro-batch 0 "
                                              f"from stage 1: {caught.value}"}
    assert board.read("result-1") is None and board.read("result-2") is None


def test_corruptedBlob_receivingStageProcessRefusesIt(job, node, tmp_path):
    _, _, ref, _ = job
    genuine = Message(Kind.ACT, 0, 0, 1, {"x": torch.zeros(2, 16, 32)}).to_bytes()  # stage 1 -> 2, micro 0
    address, corrupt = keccak256(genuine), genuine[:-1] + bytes([genuine[-1] ^ 1])
    with client_for(node) as client:
        cid = client.add_bytes(corrupt).cid
    board = Rendezvous(tmp_path / "board")
    board.post("msg-0-act-0-1", {"address": "0x" + address.hex(), "cid": cid})
    expected = (f"stage 2: PipelineError: message at 0x{address.hex()} does not match its address: content {cid} "
                f"({len(genuine)} bytes) hashes to {to_hex32(keccak256(corrupt))}, expected {to_hex32(address)}: "
                f"refusing it")
    with pytest.raises(PipelineError, match=f"^{re.escape(expected)}$"):
        run_stages([StageJob(ref, 2, node.api_addr, str(board.root), timeout_s=10)], deadline_s=60)


def test_silentUpstream_timesOut(job, node, tmp_path):
    _, _, ref, _ = job
    with pytest.raises(PipelineError, match="^stage 2: PipelineError: no ACT of step 0, micro-batch 0 from "
                                            "stage 1 within 2 s$"):
        run_stages([StageJob(ref, 2, node.api_addr, str(tmp_path / "board"), timeout_s=2)], deadline_s=60)


BASE = dict(name="pipe", seed=1, model=LM, optimizer=ADAMW, batch_size=4, steps_per_task=3,
            checkpoint_interval=1, rounds=1, shards=[{"cid": "bafyA", "hash": "0x" + "aa" * 32, "samples": 100}],
            test_set={"cid": "bafyT", "hash": "0x" + "bb" * 32})


@pytest.mark.parametrize("over,message", [
    ({"numeric_mode": "stock"}, "pipeline: a pipelined job runs in repro mode, not 'stock'"),
    ({"model": {"kind": "cnn", "in_shape": [1, 8, 8], "channels": [8], "kernel": 3, "classes": 10}},
     "pipeline: a cnn model does not split into stages (the LM and the MLP do)"),
    ({"pipeline": {**PIPE, "stages": 1}}, "pipeline.stages: expected an integer in [2, 4], got 1"),
    ({"pipeline": {**PIPE, "stages": 5}}, "pipeline.stages: expected an integer in [2, 4], got 5"),
    ({"pipeline": {**PIPE, "stages": True}}, "pipeline.stages: expected an integer in [2, 4], got True"),
    ({"pipeline": {**PIPE, "micro_batches": 0}}, "pipeline.micro_batches: expected an integer in [1, 4], got 0"),
    ({"pipeline": {**PIPE, "micro_batches": 5}}, "pipeline.micro_batches: expected an integer in [1, 4], got 5"),
    ({"pipeline": {**PIPE, "split": [0, 2]}},
     "pipeline.split: expected \"params\" or a list of 3 unit indices (each stage's first), got [0, 2]"),
    ({"pipeline": {**PIPE, "split": "balanced"}},
     "pipeline.split: expected \"params\" or a list of 3 unit indices (each stage's first), got 'balanced'"),
    ({"pipeline": {**PIPE, "split": [0, 2, 2]}}, "pipeline.split: expected 0 then strictly increasing unit "
                                                 "indices below 4 (embed, block.0, block.1, head), got [0, 2, 2]"),
    ({"pipeline": {**PIPE, "split": [1, 2, 3]}}, "pipeline.split: expected 0 then strictly increasing unit "
                                                 "indices below 4 (embed, block.0, block.1, head), got [1, 2, 3]"),
    ({"pipeline": {**PIPE, "split": [0, 2, 4]}}, "pipeline.split: expected 0 then strictly increasing unit "
                                                 "indices below 4 (embed, block.0, block.1, head), got [0, 2, 4]"),
    ({"pipeline": {"stages": 3, "micro_batches": 2}}, "pipeline.split: missing"),
    ({"pipeline": {**PIPE, "layers": 2}}, "pipeline.layers: unknown field"),
    ({"pipeline": 3}, "pipeline: expected an object"),
])
def test_manifestPipelineField_refusals(over, message):
    fields = {"pipeline": PIPE, **BASE, **over}
    with pytest.raises(ManifestError, match=f"^{re.escape(message)}$"):
        build_manifest(**fields)


def test_manifestPipelineField_acceptedPlansAndUnchangedWithout():
    plain = build_manifest(**BASE)
    assert "pipeline" not in plain.raw and plain.pipeline is None
    piped = build_manifest(**BASE, pipeline={"stages": 2, "split": [0, 2], "micro_batches": 4})
    assert {k: v for k, v in piped.raw.items() if k != "pipeline"} == plain.raw
    assert b"pipeline" not in plain.to_bytes() and piped.to_bytes() == plain.to_bytes().replace(
        b',"rounds"', b',"pipeline":{"micro_batches":4,"split":[0,2],"stages":2},"rounds"')
    assert load_manifest(piped.to_bytes()).pipeline == piped.pipeline
    assert piped.pipeline.plan(piped.model) == split_at(piped.model, [0, 2])
    mlp = build_manifest(**{**BASE, "model": {"kind": "mlp", "widths": [64, 48, 32, 10]}, "optimizer":
                            {"kind": "sgd", "lr": 0.1}}, pipeline={"stages": 3, "split": "params", "micro_batches": 1})
    assert mlp.pipeline.plan(mlp.model).starts == (0, 1, 2)


def test_stageMemory_paramsAboutOneOverS_activationsOfItsOwnLayers():
    big = build_manifest(**{**BASE, "model": {"kind": "lm", "d_model": 256, "n_layers": 4, "n_heads": 4,
                                              "seq_len": 128}, "batch_size": 8})
    whole = training_memory_mib(big.model, 8)
    plan = split_by_params(big.model, 3)
    stages = [stage_memory_mib(plan, s, 8) for s in range(3)]
    assert plan.starts == (0, 2, 4) and (whole, stages) == (954, [626, 737, 630])
    own = [m - RUNTIME_MIB for m in stages]  # the middle stage holds 2 of the 4 blocks
    assert sum(own) >= whole - RUNTIME_MIB and max(own) < 0.55 * (whole - RUNTIME_MIB)
    mlp = build_manifest(**{**BASE, "model": {"kind": "mlp", "widths": [64, 48, 32, 10]},
                            "optimizer": {"kind": "sgd", "lr": 0.1}, "batch_size": 64})
    mplan = split_by_params(mlp.model, 3)
    assert [stage_memory_mib(mplan, s, 64) for s in range(3)] == [RUNTIME_MIB + 1] * 3
