"""Data-parallel repro training (truetrain.training.distributed, .launch): the digits MLP
and a small LM trained by 1, 2 and 4 ranks (gloo, CPU processes) give the checkpoints and
losses of one process bit for bit, at every checkpoint; one launch per world size trains
every job, since a rank's start (a fresh interpreter importing torch) is most of the cost."""

from __future__ import annotations

import pytest

from tests.training.conftest import SEED, data_ref
from truetrain.errors import TrainingError
from truetrain.hardware import HardwareProfile
from truetrain.training import build_manifest, task_start, train
from truetrain.training.distributed import rank_rows
from truetrain.training.launch import TrainJob, train_across


@pytest.fixture(scope="module")
def jobs(digits1):
    from truetrain.training.text import demo_corpus, encode_text_shard, split_text

    shards, test = digits1
    # 18 samples: uneven shares at 4 ranks (5, 5, 4, 4); momentum carries state across steps
    mlp = build_manifest(name="mlp", seed=SEED, numeric_mode="repro", model={"kind": "mlp", "widths": [64, 32, 10]},
                         optimizer={"kind": "sgd", "lr": 0.1, "momentum": 0.9}, batch_size=18, steps_per_task=4,
                         checkpoint_interval=2, rounds=1, shards=[data_ref(shards[0])], test_set=data_ref(test))
    text, held = split_text(demo_corpus(20_000), 1, seq_len=16)
    blob = encode_text_shard(text[0])
    # 4 sequences: one a rank at 4; dropout (masks by batch position), a tied embedding,
    # adamw's clip over every gradient
    lm = build_manifest(name="lm", seed=SEED, numeric_mode="repro",
                        model={"kind": "lm", "d_model": 32, "n_layers": 1, "n_heads": 2, "seq_len": 16,
                               "dropout": 0.1},
                        optimizer={"kind": "adamw", "lr": 0.003, "warmup_steps": 2, "clip_norm": 0.5},
                        batch_size=4, steps_per_task=3, checkpoint_interval=3, rounds=1, shards=[data_ref(blob)],
                        test_set=data_ref(encode_text_shard(held)))
    return [TrainJob(mlp, shards[0], task_start(mlp, None, 0, 0), 4, 2),
            TrainJob(mlp, shards[0], task_start(mlp, None, 0, 0), 4, 2, micro_batch=2),
            TrainJob(lm, blob, task_start(lm, None, 0, 0), 3)]


@pytest.fixture(scope="module")
def single(jobs):
    """Each job trained in this process by the ordinary loop: the reference."""
    return [train(j.manifest, j.shard, j.checkpoint, j.steps, every=j.every) for j in jobs]


def _hashes(result):
    checkpoints, losses = result
    return [c.hash() for c in checkpoints], losses


@pytest.mark.parametrize("world", [1, 2, 4])
def test_trainAcross_worldSizes_giveTheSingleProcessCheckpointsAndLosses(jobs, single, world):
    results = train_across(jobs, world)
    for job, got, want in zip(jobs, results, single):
        assert _hashes(got) == _hashes(want), (job.manifest.name, job.micro_batch, world)
    assert len(single[0][0]) == 3 and len(set(_hashes(single[0])[0])) == 3  # training moved


def test_rankRows_splitsTheBatchContiguouslyByRank():
    assert [rank_rows(18, 4, r) for r in range(4)] == [(0, 5), (5, 10), (10, 14), (14, 18)]
    assert [rank_rows(4, 4, r) for r in range(4)] == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert rank_rows(7, 1, 0) == (0, 7)


def test_trainAcross_worldLargerThanTheBatch_isRefusedBeforeAnyRankStarts(jobs):
    with pytest.raises(TrainingError, match="a batch of 4 cannot be split across 5 devices"):
        train_across(jobs[2:], 5)


def test_trainAcross_stockJob_isRefused(jobs):
    stock = build_manifest(name="s", seed=SEED, numeric_mode="stock", model={"kind": "mlp", "widths": [64, 32, 10]},
                           optimizer={"kind": "sgd", "lr": 0.1}, batch_size=8, steps_per_task=2,
                           checkpoint_interval=2, rounds=1, shards=[data_ref(jobs[0].shard)],
                           test_set=data_ref(jobs[0].shard))
    with pytest.raises(TrainingError, match="only repro jobs train across devices"):
        train_across([TrainJob(stock, jobs[0].shard, task_start(stock, None, 0, 0), 2)], 2)


def test_hardwareProfile_declaresDevices_onlyWhenMoreThanOne():
    one = HardwareProfile(1, "cpu", 1024, 10, 2, "host")
    assert b"devices" not in one.canonical_json()
    two = HardwareProfile(1, "cpu", 1024, 10, 2, "host", devices=2)
    assert b'"devices":2' in two.canonical_json() and two.profile_hash() != one.profile_hash()
