"""A completed job's results: the final model, held-out accuracy (a language model: bits
per byte) and loss per round.

Everything is read through :class:`~truetrain.market.MarketReader`, so each checkpoint,
result bundle and the test set is checked against the hash the chain or the manifest holds
before it is used.
"""

from __future__ import annotations

import json
from pathlib import Path

from truetrain.cli_options import Refused
from truetrain.market import JobStatus, encode_task_id
from truetrain.training import decode_checkpoint, evaluate


def heldout_metric(manifest, checkpoint, test) -> float:
    """A classifier's held-out accuracy, or a language model's held-out bits per byte."""
    if manifest.model.kind == "lm":
        from truetrain.training.lm_eval import heldout_metrics

        return heldout_metrics(manifest, checkpoint, test)["bits_per_byte"]
    return evaluate(manifest, checkpoint, test)


def require_completed(job) -> None:
    if job.status != JobStatus.COMPLETED:
        raise Refused(f"job {job.job_id} is {job.status.name.lower()} (round {min(job.current_round + 1, job.rounds)}"
                      f" of {job.rounds}), not completed: it has no final model yet")


def round_losses(reader, job) -> list[float | None]:
    """Mean over round r's shard tasks of each task's mean training loss (None if none
    reported; a job split into stages: its last stages', which take the loss)."""
    out = []
    for round_index in range(job.rounds):
        if job.stages > 1:
            losses = [reader.stage_result(encode_task_id(job.job_id, round_index, i)).metrics.get("mean_train_loss")
                      for i in range(job.stages - 1, job.shards, job.stages)]
        else:
            losses = [reader.result(encode_task_id(job.job_id, round_index, i)).metrics.get("mean_train_loss")
                      for i in range(job.shards)]
        known = [float(v) for v in losses if v is not None]
        out.append(sum(known) / len(known) if known else None)
    return out


def collect_results(reader, job_id: int, out_dir: Path) -> dict:
    """Write ``model.ckpt``, ``training.png`` and ``summary.json`` to ``out_dir``; return the summary."""
    from truetrain.market.plot import plot_training

    job = reader.job(job_id)
    require_completed(job)
    cid, digest, data = reader.final_checkpoint(job_id)
    manifest = reader.manifest(job_id)
    test = reader.test_set(job_id)
    lm = manifest.model.kind == "lm"
    key = "test_bits_per_byte" if lm else "test_accuracy"
    value = heldout_metric(manifest, decode_checkpoint(data), test)  # checked by final_checkpoint

    advanced = reader.rounds_advanced(job_id)  # round entered → checkpoint after the previous one
    per_round = []
    for done in range(1, job.rounds + 1):
        round_cid, round_hash = advanced[done]
        per_round.append(heldout_metric(manifest, decode_checkpoint(reader.fetch_checkpoint(round_cid, round_hash)), test))
    losses = round_losses(reader, job)

    out_dir.mkdir(parents=True, exist_ok=True)
    model_path, plot_path, summary_path = out_dir / "model.ckpt", out_dir / "training.png", out_dir / "summary.json"
    model_path.write_bytes(data)
    rounds = list(range(1, job.rounds + 1))
    plot_training(plot_path, rounds, losses, per_round, bits_per_byte=lm)
    summary = {
        "job_id": job_id, "name": manifest.name, "model": manifest.model.kind, "rounds": job.rounds,
        "shards": job.shards // job.stages, "stages": job.stages, "final_checkpoint": {"cid": cid, "hash": "0x" + digest.hex()},
        key: value, "test_samples": manifest.test_set.samples,
        "per_round": [{"round": r, key: a, "mean_train_loss": loss}
                      for r, a, loss in zip(rounds, per_round, losses)],
        "files": {"model": str(model_path), "plot": str(plot_path), "summary": str(summary_path)},
    }
    summary_path.write_text(json.dumps(summary, indent=2) + "\n")
    return summary
