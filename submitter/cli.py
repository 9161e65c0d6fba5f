"""``truetrain job``, ``truetrain identity`` and ``truetrain token``: the submitter's commands.

Every command checks what it can before it sends anything: a refused command prints one
line, exits non-zero and leaves the account's nonce where it was. Heavy modules (torch,
the market package) are imported inside the commands so that ``--help`` stays quick.
"""

from __future__ import annotations

from pathlib import Path

import click

from submitter.accounts import identity, token
from submitter.models import init_defaults, job_export
from truetrain.cli_options import (ADDRESS, JOB_ID, JobIdCommand, Refused, TokenAmountType, emit, format_tokens,
                                   json_option, session_options)
from truetrain.errors import ConfigError
from truetrain.market.jobs import DEFAULT_TERMS
from truetrain.network import MAX_FETCH_KIBPS, MAX_RPC_RTT_MS


def _tokens(wei: int) -> str:
    """A default amount as the option takes it (whole TRAIN)."""
    return str(wei // 10**18)


#: Blocks are uint32 on chain; one task's compute is steps × batch size in uint64.
UINT32 = click.IntRange(1, 2**32 - 1)
#: Width of a round's progress bar in characters.
BAR = 10


class DatasetType(click.ParamType):
    """``digits`` or the path of an existing ``.npz`` file."""

    name = "digits|PATH.npz"

    def convert(self, value, param, ctx):
        if value == "digits":
            return value
        path = Path(value)
        if path.suffix != ".npz":
            self.fail(f"expected 'digits' or a .npz file, got {value!r}", param, ctx)
        if not path.is_file():
            self.fail(f"no such file: {value}", param, ctx)
        return str(path)


@click.group()
def job() -> None:
    """Submit training jobs, follow them, cancel them, fetch their results."""


@job.command("submit")
@click.option("--name", help="Job name recorded in the manifest [default: digits-mlp, or text-lm].")
@click.option("--dataset", type=DatasetType(), default="digits", show_default=True,
              help="'digits' or a .npz with arrays x, y (and optionally x_test, y_test).")
@click.option("--model", type=click.Choice(["mlp", "lm"]), default="mlp", show_default=True,
              help="Model family: an MLP classifier, or a byte-level transformer language model.")
@click.option("--data", type=click.Path(exists=True),
              help="--model lm: a UTF-8 text file or a folder of them; or records with --text-field: a .jsonl "
                   "file, a .parquet file or a folder saved by Hugging Face datasets' save_to_disk [default: the "
                   "built-in corpus, the Python standard library's source].")
@click.option("--text-field", metavar="NAME",
              help="The field (column) of --data's records that holds each record's text. Records are joined in "
                   "order with nothing between them, as a folder's files are: the same shards as one plain file "
                   "per record.")
@click.option("--hidden", type=click.IntRange(1, 65536), default=128, show_default=True,
              help="Hidden width: the MLP is [features, hidden, classes].")
@click.option("--d-model", type=click.IntRange(8, 4096), default=256, show_default=True, help="LM: width.")
@click.option("--layers", type=click.IntRange(1, 96), default=4, show_default=True, help="LM: blocks.")
@click.option("--heads", type=click.IntRange(1, 64), default=4, show_default=True, help="LM: attention heads.")
@click.option("--seq-len", type=click.IntRange(2, 8192), default=128, show_default=True, help="LM: context bytes.")
@click.option("--dropout", type=click.FloatRange(0, 0.9), default=0.0, show_default=True,
              help="LM: dropout rate on the embeddings and residual branches (a counter-based mask: reproducible).")
@click.option("--outer-lr", type=click.FloatRange(0, 10, min_open=True),
              help="LM: DiLoCo outer learning rate [default: 0.7; with --outer-momentum 0 and 1.0: FedAvg].")
@click.option("--outer-momentum", type=click.FloatRange(0, 1, max_open=True),
              help="LM: DiLoCo outer Nesterov momentum [default: 0.9].")
@click.option("--warmup", type=click.IntRange(0, 10**6), default=0, show_default=True,
              help="AdamW: warm-up steps of the learning-rate schedule.")
@click.option("--stages", type=click.IntRange(1, 8), default=1, show_default=True,
              help="Split the model by layers into this many stages, each a task on its own worker; the stages "
                   "of a shard run at once and exchange activations and gradients (no drawn audits: "
                   "--audit-rate defaults to 0).")
@click.option("--micro-batches", type=click.IntRange(1), default=1, show_default=True,
              help="--stages: micro-batches a step's batch flows through the stages in (GPipe).")
@click.option("--shards", type=click.IntRange(1, 1024), default=3, show_default=True, help="Training tasks per round.")
@click.option("--rounds", type=click.IntRange(1, 1024), default=3, show_default=True, help="Rounds of train-then-aggregate.")
@click.option("--steps", type=click.IntRange(1, 10**6), default=60, show_default=True, help="Optimizer steps per task.")
@click.option("--batch-size", type=click.IntRange(1, 65536), help="Samples (LM: sequences) per step [default: 32 for mlp, 8 for lm].")
@click.option("--checkpoint-interval", type=click.IntRange(1, 10**6), default=20, show_default=True,
              help="Steps between committed checkpoints (must divide --steps).")
@click.option("--optimizer", type=click.Choice(["sgd", "adam", "adamw"]),
              help="Optimizer [default: sgd for mlp, adamw (cosine schedule, clipping) for lm].")
@click.option("--lr", type=click.FloatRange(0, 10, min_open=True),
              help="Learning rate [default: 0.1 for mlp, 0.003 for lm].")
@click.option("--momentum", type=click.FloatRange(0, 1, max_open=True), default=0.9, show_default=True,
              help="SGD momentum.")
@click.option("--seed", type=click.IntRange(0, 2**64 - 1), default=3, show_default=True,
              help="Seed of the split, the shards and the initial model.")
@click.option("--numeric-mode", type=click.Choice(["repro", "stock"]), default="repro", show_default=True,
              help="repro: bit-exact, auditable training; stock: plain torch.")
@click.option("--limbs", type=click.IntRange(2, 3),
              help="Repro mode: int8 limbs per GEMM operand, 2 (13-bit operands) or 3 (20-bit)  [default: 2]")
@click.option("--reward", "reward_wei", type=TokenAmountType(), default=_tokens(DEFAULT_TERMS.reward_per_task),
              show_default=True,
              help="TRAIN paid per task.")
@click.option("--audit-fee", "audit_fee_wei", type=TokenAmountType(allow_zero=True), default=_tokens(DEFAULT_TERMS.audit_fee),
              show_default=True,
              help="TRAIN paid to the auditor of an audited task.")
@click.option("--collateral", "collateral_wei", type=TokenAmountType(allow_zero=True),
              default=_tokens(DEFAULT_TERMS.worker_collateral),
              show_default=True, help="Stake a worker locks per task (and a challenger's bond): at least 20 TRAIN "
                                      "and the reward, at most 100 x the reward.")
@click.option("--audit-rate", type=click.FloatRange(0, 1),
              help=f"Share of tasks audited by a re-executing verifier [default: "
                   f"{DEFAULT_TERMS.audit_rate_bps / 10_000:g}; 0 with --stages].")
@click.option("--accept-window", type=UINT32, default=20, show_default=True, help="Blocks to accept an offer.")
@click.option("--compute-window", type=UINT32, default=60, show_default=True, help="Blocks to compute and commit.")
@click.option("--reveal-window", type=UINT32, default=60, show_default=True, help="Blocks to reveal.")
@click.option("--challenge-window", type=UINT32, default=60, show_default=True,
              help="Blocks a result stands before it is final (at least the compute window).")
@click.option("--device-class", type=click.IntRange(0, 255), default=1, show_default=True,
              help="Least device class a worker needs (1 cpu, 2 cuda).")
@click.option("--memory-mib", type=click.IntRange(0, 2**32 - 1),
              help="Least device memory a worker needs [default: 1024, or what the LM needs to train if more].")
@click.option("--region", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Preferred region code (0: none).")
@click.option("--expiry-blocks", type=click.IntRange(1, 2**63), default=100_000, show_default=True,
              help="The job expires this many blocks from now.")
@click.option("--min-fetch-kibps", type=click.IntRange(0, MAX_FETCH_KIBPS), default=0, show_default=True,
              help="Draw only workers whose declared IPFS fetch throughput is at least this many KiB/s, "
                   "measured within the pool's liveness window (0: no requirement).")
@click.option("--max-rtt-ms", type=click.IntRange(0, MAX_RPC_RTT_MS), default=0, show_default=True,
              help="Draw only workers whose declared RPC round-trip is at most this many ms, measured within "
                   "the pool's liveness window (0: no requirement).")
@click.option("--no-approve", is_flag=True, help="Use the existing allowance instead of approving the escrow.")
@click.option("--init", type=click.Path(exists=True), metavar="PATH",
              help="Start from these weights instead of the seed's: a safetensors file (truetrain's or GPT-2's "
                   "names) or a folder with model.safetensors (`job export`'s, or a transformers GPT-2 folder, "
                   "whose config.json also sets --model lm and the LM shape flags not given). Names and shapes must "
                   "be the job's model; the checkpoint is published and its hash bound in the manifest.")
@json_option
@session_options(signing=True)
def job_submit(session, as_json, name, dataset, model, data, hidden, d_model, layers, heads, seq_len, dropout, outer_lr,
               outer_momentum, warmup, stages, micro_batches, shards, rounds, steps, batch_size, checkpoint_interval,
               optimizer, lr, momentum, seed, numeric_mode, limbs, reward_wei, audit_fee_wei, collateral_wei, audit_rate,
               accept_window, compute_window, reveal_window, challenge_window, device_class, memory_mib, region,
               expiry_blocks, min_fetch_kibps, max_rtt_ms, no_approve, init, text_field):
    """Publish a dataset and manifest to IPFS and create a job that escrows its whole cost.

    The escrow is (shards + 1) × rounds × (reward + audit fee): every round has one
    aggregation task besides its shard tasks.
    """
    from submitter.jobs import TrainingSpec, plan_job, submit_job
    from truetrain.market.jobs import JobTerms

    if init is not None:
        flags = init_defaults(init, {"model": model, "d_model": d_model, "layers": layers, "heads": heads,
                                     "seq_len": seq_len})
        model, d_model, layers, heads, seq_len = (flags[k] for k in ("model", "d_model", "layers", "heads", "seq_len"))
    lm = model == "lm"
    batch_size = batch_size or (8 if lm else 32)
    if micro_batches > 1 and stages == 1:
        raise Refused("--micro-batches applies to a model split with --stages")
    if audit_rate is None:
        audit_rate = 0.0 if stages > 1 else DEFAULT_TERMS.audit_rate_bps / 10_000
    pipeline = {"stages": stages, "split": "params", "micro_batches": micro_batches} if stages > 1 else None
    shape = {"d_model": d_model, "n_layers": layers, "n_heads": heads, "seq_len": seq_len}
    if dropout:
        shape["dropout"] = dropout
    fit_memory = memory_mib is None
    if fit_memory:
        memory_mib = 1024  # an LM's: what it (its largest stage) needs to train, if more
    if data is not None and not lm:
        raise Refused("--data is the text of --model lm; an MLP's data is --dataset")
    if text_field is not None and data is None:
        raise ConfigError("--text-field names the text field of --data's records: give --data")
    if dropout and not lm:
        raise Refused("--dropout is an option of --model lm")
    outer = None
    if lm and (outer_lr, outer_momentum) != (1.0, 0.0):
        outer = {"lr": 0.7 if outer_lr is None else outer_lr, "momentum": 0.9 if outer_momentum is None else outer_momentum}
    spec = TrainingSpec(name or ("text-lm" if lm else "digits-mlp"), (data or "demo") if lm else dataset, hidden, shards, rounds, steps, batch_size,
                        checkpoint_interval, optimizer or ("adamw" if lm else "sgd"), lr or (0.003 if lm else 0.1),
                        momentum, seed, numeric_mode, limbs, model,
                        shape if lm else None,
                        outer, warmup, pipeline, init, text_field)
    terms = JobTerms(reward_wei, audit_fee_wei, collateral_wei, accept_window, compute_window, reveal_window,
                     challenge_window, device_class, memory_mib, region, round(audit_rate * 10_000), expiry_blocks,
                     min_fetch_kibps, max_rtt_ms)
    plan = plan_job(spec, terms, fit_memory=fit_memory and lm)
    created = submit_job(session, plan, approve=not no_approve)
    split = f" in {stages} stages" if stages > 1 else ""
    lines = [f"job {created['job_id']} created: {created['model']}, {shards} shards{split} x {rounds} rounds "
             f"({created['tasks']} tasks), "
             f"escrow {created['escrow']} TRAIN; manifest {created['manifest_cid']}"]
    lines.append(f"disputes end in {created['disputes']}")
    if created["identity"]:
        lines.insert(0, created["identity"])
    if created["initial_checkpoint"]:
        lines.append(f"starts from {init} (initial checkpoint {created['initial_checkpoint']['cid']}, "
                     f"hash {created['initial_checkpoint']['hash']})")
    emit(created, as_json, "\n".join(lines))


def _bar(done: int, total: int) -> str:
    filled = BAR * done // total if total else 0
    return "[" + "#" * filled + "-" * (BAR - filled) + "]"


def read_job(session, job_id: int):
    """The job's :class:`~truetrain.market.JobView` from the chain alone (no IPFS), or UnknownJob."""
    from truetrain.errors import UnknownJob
    from truetrain.market import JobView

    market = session.contracts.market
    job = JobView.read(market, job_id)
    if not job.exists:
        raise UnknownJob(f"no job {job_id} on the market at {market.address}")
    return job


def job_report(session, job_id: int) -> dict:
    """The job with per-round progress and the current round's tasks (for `job status`)."""
    from truetrain.market import JobStatus, TaskStatus, TaskView, encode_task_id

    job = read_job(session, job_id)
    rounds = []
    for r in range(job.rounds):
        done = job.tasks_per_round if r < job.current_round else 0
        rounds.append({"round": r + 1, "finalized": done, "tasks": job.tasks_per_round})
    tasks = []
    if job.current_round < job.rounds:
        for index in range(job.tasks_per_round):
            view = TaskView.read(session.contracts.market, encode_task_id(job_id, job.current_round, index))
            tasks.append({"task_id": str(view.task_id), "index": index, "aggregation": index == job.shards,
                          "shard": index // job.stages if index < job.shards else None,
                          "stage": index % job.stages if index < job.shards and job.stages > 1 else None,
                          "status": view.status.name.lower() if view.status != TaskStatus.NONE else "not drawn",
                          "worker": None if view.status == TaskStatus.NONE else view.worker,
                          "auditor": view.auditor if view.audited else None,
                          # a Pending task's `deadline` is the block it was sent back in, not a deadline
                          "deadline": None if view.status == TaskStatus.PENDING else view.deadline})
        rounds[job.current_round]["finalized"] = sum(t["status"] == "finalized" for t in tasks)
    return {"job_id": job_id, "submitter": job.submitter, "status": job.status.name.lower(),
            "active": job.status == JobStatus.ACTIVE, "current_round": min(job.current_round + 1, job.rounds),
            "rounds": rounds, "tasks": tasks, "escrow_wei": job.escrow, "surplus_wei": job.surplus,
            "expiry_block": job.expiry_block, "checkpoint_cid": job.checkpoint_cid or None,
            "min_fetch_kibps": job.min_fetch_kibps, "max_rpc_rtt_ms": job.max_rpc_rtt_ms, "stages": job.stages}


@job.command("status", cls=JobIdCommand)
@click.argument("job_id", type=JOB_ID)
@click.option("--follow", is_flag=True,
              help="Read the chain until the job ends: a progress bar in tasks and rounds with an ETA from the "
                   "chain's pace, redrawn on a terminal, else a line per change (--json: a JSON object per change). "
                   "Exits 0 when the job completes, 3 when it is cancelled or expires, 130 on Ctrl-C.")
@click.option("--poll-interval", type=click.FloatRange(0.1, 3600), metavar="SECONDS",
              help="--follow: seconds between reads of the chain [default: 2].")
@json_option
@session_options()
def job_status(session, as_json, job_id, follow, poll_interval):
    """Show a job's progress by round, its current round's tasks and the escrow it holds
    (--follow: until the job ends)."""
    if poll_interval is not None and not follow:
        raise ConfigError("--poll-interval applies to --follow")
    if follow:
        from submitter.follow import follow_job

        return follow_job(session, job_id, job_report, as_json, poll_interval or 2.0)
    report = job_report(session, job_id)
    total = len(report["rounds"])
    lines = [f"job {job_id}: {report['status']}, submitted by {report['submitter']}"]
    for r in report["rounds"]:
        lines.append(f"round {r['round']}/{total} {_bar(r['finalized'], r['tasks'])} {r['finalized']}/{r['tasks']} finalized")
    if report["tasks"]:
        counts: dict[str, int] = {}
        for t in report["tasks"]:
            counts[t["status"]] = counts.get(t["status"], 0) + 1
        lines.append(f"round {report['current_round']} tasks: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
        for t in report["tasks"]:
            kind = "aggregation" if t["aggregation"] else f"shard {t['shard']}" + (
                f", stage {t['stage']}" if t["stage"] is not None else "")
            who = f" worker {t['worker']}" if t["worker"] else ""
            lines.append(f"  task {t['index']} ({kind}): {t['status']}{who}")
    lines.append(f"escrow left {format_tokens(report['escrow_wei'])} TRAIN"
                 + (f" (surplus {format_tokens(report['surplus_wei'])})" if report["surplus_wei"] else ""))
    if report["status"] == "completed":
        lines.append(f"final model {report['checkpoint_cid']} (`truetrain job results {job_id} --out DIR` evaluates it)")
    elif report["checkpoint_cid"]:
        lines.append(f"latest global checkpoint {report['checkpoint_cid']}")
    emit(report, as_json, "\n".join(lines))


@job.command("list")
@click.option("--submitter", type=ADDRESS, help="Whose jobs [default: the signing account's].")
@json_option
@session_options(signing=True)
def job_list(session, as_json, submitter):
    """List a submitter's jobs with their status and progress."""
    from truetrain.market import JobView

    address = session.address_or_own(submitter)
    market, page, ids = session.contracts.market, 50, []
    while True:  # jobsOf is paginated on chain
        batch = session.client.call(market.functions.jobsOf(address, len(ids), page))
        ids.extend(batch)
        if len(batch) < page:
            break
    jobs = []
    for job_id in ids:
        view = JobView.read(market, job_id)
        jobs.append({"job_id": job_id, "status": view.status.name.lower(), "shards": view.shards, "rounds": view.rounds,
                     "rounds_done": view.current_round, "escrow_wei": view.escrow})
    lines = [f"{len(jobs)} job(s) of {address}"]
    lines += [f"  job {j['job_id']}: {j['status']}, {j['rounds_done']}/{j['rounds']} rounds done, {j['shards']} shards, "
              f"escrow left {format_tokens(j['escrow_wei'])} TRAIN" for j in jobs]
    emit({"submitter": address, "jobs": jobs}, as_json, "\n".join(lines))


@job.command("cancel", cls=JobIdCommand)
@click.argument("job_id", type=JOB_ID)
@json_option
@session_options(signing=True)
def job_cancel(session, as_json, job_id):
    """Cancel your active job: nothing new is drawn and never-drawn tasks are refunded."""
    from web3.logs import DISCARD

    from submitter.jobs import refuse_unless_submitter

    account = session.account
    view = read_job(session, job_id)
    refuse_unless_submitter(view, account.address, "cancel")
    market = session.contracts.market
    receipt = session.send(market.functions.cancelJob(job_id))
    refund = market.events.JobCancelled().process_receipt(receipt.raw, errors=DISCARD)[0]["args"]["refund"]
    emit({"job_id": job_id, "refund_wei": refund, "tx": receipt.tx_hash}, as_json,
         f"job {job_id} cancelled: {format_tokens(refund)} TRAIN credited back (`truetrain token withdraw` pays it out)")


@job.command("results", cls=JobIdCommand)
@click.argument("job_id", type=JOB_ID)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder for model.ckpt, training.png and summary.json.")
@json_option
@session_options()
def job_results(session, as_json, job_id, out_dir):
    """Download a completed job's final model, evaluate it and plot its training by round."""
    from truetrain.market.outcome import collect_results

    summary = collect_results(session.reader, job_id, out_dir)
    files = summary["files"]
    if "test_bits_per_byte" in summary:
        by_round = ", ".join(f"{r['test_bits_per_byte']:.3f}" for r in summary["per_round"])
        held = f"held-out {summary['test_bits_per_byte']:.3f} bits per byte (by round: {by_round})"
    else:
        held = f"held-out accuracy {summary['test_accuracy']:.1%}"
    emit(summary, as_json, f"job {job_id}: {held} after {summary['rounds']} round(s); "
                           f"wrote {files['model']}, {files['plot']}, {files['summary']}")


@job.command("sample", cls=JobIdCommand)
@click.argument("job_id", type=JOB_ID)
@click.option("--prompt", required=True, help="Text the model continues.")
@click.option("--length", type=click.IntRange(1, 4096), default=200, show_default=True, help="Bytes to generate.")
@click.option("--temperature", type=click.FloatRange(0, 10), default=0.0, show_default=True,
              help="0: the likeliest byte each time; above 0: sampled (seeded, reproducible).")
@click.option("--seed", type=click.IntRange(0, 2**64 - 1), default=0, show_default=True, help="Sampling seed.")
@json_option
@session_options()
def job_sample(session, as_json, job_id, prompt, length, temperature, seed):
    """Generate text from a language-model job's current global model."""
    from truetrain.training.lm_eval import sample

    manifest = session.reader.manifest(job_id)
    if manifest.model.kind != "lm":
        raise Refused(f"job {job_id} trains a {manifest.model.kind}, not a language model: nothing to sample")
    cid, _, data = session.reader.final_checkpoint(job_id)
    text = sample(manifest, data, prompt.encode(), length, temperature=temperature, seed=seed)
    out = text.decode("utf-8", errors="replace")
    emit({"job_id": job_id, "checkpoint_cid": cid, "prompt": prompt, "text": out}, as_json, prompt + out)


job.add_command(job_export)

__all__ = ["identity", "job", "token"]
