"""Quality: repro-mode training on digits reaches the issue's held-out accuracy."""

from __future__ import annotations

from truetrain.training import aggregate, evaluate, run_task


def test_reproMlp_oneMachine_atLeast95Percent(digits1, make_manifest):
    shards, test = digits1
    manifest = make_manifest(shards, test, steps_per_task=300, checkpoint_interval=100)
    result = run_task(manifest, shards[0], None, 0, 0)
    accuracy = evaluate(manifest, result.final_checkpoint, test)
    assert accuracy >= 0.95, accuracy
    assert result.metrics["train_loss"][-1] < result.metrics["train_loss"][0]


def test_reproMlp_weightedAverage3Shards5Rounds_atLeast93Percent(digits3, make_manifest):
    shards, test = digits3
    manifest = make_manifest(shards, test, batch_size=32, steps_per_task=40,
                             checkpoint_interval=20, rounds=5)
    global_ckpt = None
    accuracies = []
    for rnd in range(manifest.rounds):
        results = [run_task(manifest, s, global_ckpt, i, rnd) for i, s in enumerate(shards)]
        global_ckpt = aggregate(manifest, rnd, results)
        accuracies.append(evaluate(manifest, global_ckpt, test))
    assert global_ckpt.step == 5
    assert accuracies[-1] >= 0.93, accuracies


def test_stockMode_trainsToo(digits1, make_manifest):
    shards, test = digits1
    manifest = make_manifest(shards, test, numeric_mode="stock", steps_per_task=200,
                             checkpoint_interval=100)
    result = run_task(manifest, shards[0], None, 0, 0)
    assert evaluate(manifest, result.final_checkpoint, test) >= 0.93
