"""Submitting a job: check everything, publish the data and manifest, register, escrow, create.

:func:`plan_job` does every check that needs no node (the dataset loads, the shapes fit,
the numbers are in range); :func:`submit_job` then checks the chain side (balance, or the
allowance with ``approve=False``) before anything is published or sent, so a refused
submission leaves neither IPFS objects nor transactions behind.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace

from truetrain.cli_options import ROLE_BITS, Refused, Session, format_tokens
from truetrain.errors import ConfigError
from truetrain.market.jobs import JobTerms, bind_after_create, program_binding, shards_of
from truetrain.trace.binding import unbound_reason
from truetrain.market.terms_check import check_cid, check_terms
from truetrain.training import Dataset, build_manifest, load_dataset, publish_dataset, split_test
from truetrain.training.intgemm import DEFAULT_LIMBS
from truetrain.training.manifest import MAX_CHECKPOINT_LEAVES

#: The market stores the escrow in 128 bits.
MAX_ESCROW_WEI = 2**128 - 1


@dataclass(frozen=True)
class TrainingSpec:
    """What the manifest says about the training, from the command's flags."""

    name: str
    dataset: str
    hidden: int
    shards: int
    rounds: int
    steps: int
    batch_size: int
    checkpoint_interval: int
    optimizer: str
    lr: float
    momentum: float
    seed: int
    numeric_mode: str
    #: int8 limbs per GEMM operand in repro mode (None: the default, 2).
    limbs: int | None = None
    #: "mlp" (``dataset``: digits or a .npz) or "lm" (``dataset``: "demo", text files or records, see
    #: :mod:`truetrain.training.text_sources`)
    model: str = "mlp"
    #: an LM's shape: d_model, n_layers, n_heads, seq_len
    lm: dict | None = None
    #: DiLoCo's outer step {"lr", "momentum"} (None: FedAvg)
    outer: dict | None = None
    #: AdamW's warm-up steps
    warmup: int = 0
    #: the model split by layers: {"stages", "split", "micro_batches"} (None: not split)
    pipeline: dict | None = None
    #: weights the job starts from: a safetensors file or a folder (None: the seed's initial model)
    init: str | None = None
    #: the field of ``dataset``'s records that holds their text (.jsonl, .parquet, a saved datasets folder)
    text_field: str | None = None

    @property
    def stages(self) -> int:
        return self.pipeline["stages"] if self.pipeline else 1

    def optimizer_spec(self) -> dict:
        if self.optimizer == "sgd":
            return {"kind": "sgd", "lr": self.lr, "momentum": self.momentum}
        if self.optimizer == "adamw":
            return {"kind": "adamw", "lr": self.lr, "warmup_steps": self.warmup}
        return {"kind": "adam", "lr": self.lr}

    def model_spec(self, widths: list[int]) -> dict:
        return {"kind": "lm", **self.lm} if self.model == "lm" else {"kind": "mlp", "widths": widths}


@dataclass(frozen=True)
class JobPlan:
    """A checked submission: the data, the model's widths, the market terms and the initial
    parameters read from ``spec.init`` (None: the seed's)."""

    spec: TrainingSpec
    data: Dataset
    widths: list[int]
    terms: JobTerms
    init: dict | None = None

    @property
    def escrow(self) -> int:
        return self.terms.escrow(self.spec.shards * self.spec.stages, self.spec.rounds)

    @property
    def compute_per_task(self) -> int:
        return self.spec.steps * self.spec.batch_size


def worker_memory_mib(manifest) -> int:
    """What one worker must hold for a task of ``manifest``: the whole model, or a pipelined
    job's largest stage."""
    from truetrain.training.memory import stage_memory_mib, training_memory_mib

    if manifest.pipeline is None:
        return training_memory_mib(manifest.model, manifest.batch_size)
    plan = manifest.pipeline.plan(manifest.model)
    return max(stage_memory_mib(plan, s, manifest.batch_size) for s in range(plan.stages))


def plan_text_job(spec: TrainingSpec, terms: JobTerms, fit_memory: bool = False) -> JobPlan:
    """An LM job's checks: the text reads (plain, or the records' ``text_field``) and splits
    into the shards and a held-out part, the model's shape is valid, and the workers'
    declared memory holds it (``fit_memory``: raise the terms' memory to what the model, or
    its largest stage, needs)."""
    from truetrain.training.text import demo_corpus, split_text
    from truetrain.training.text_sources import read_corpus

    text = demo_corpus() if spec.dataset == "demo" else read_corpus(spec.dataset, spec.text_field)
    shards, held = split_text(text, spec.shards, spec.lm["seq_len"])
    plan = JobPlan(spec, (shards, held), [], terms)
    need = worker_memory_mib(build_job_manifest(spec, plan))
    if fit_memory and need > terms.memory_mib:
        plan = JobPlan(spec, plan.data, [], replace(terms, memory_mib=need))
    elif need > terms.memory_mib:
        raise ConfigError(f"the model needs about {need:,} MiB to train (parameters, optimizer state, activations"
                          f"{'; its largest stage' if spec.pipeline else ''}), more than --memory-mib "
                          f"{terms.memory_mib:,}: raise it or shrink the model or batch")
    if plan.escrow > MAX_ESCROW_WEI:
        raise ConfigError(f"escrow {format_tokens(plan.escrow)} TRAIN is more than the market can hold")
    return plan


def plan_job(spec: TrainingSpec, terms: JobTerms, *, fit_memory: bool = False) -> JobPlan:
    """Check the submission without any node; raise :class:`ConfigError` or ``DatasetError``
    (``fit_memory``: an LM's terms ask for at least the memory it needs)."""
    check_terms(terms, spec.stages)
    if spec.limbs is not None and spec.numeric_mode != "repro":
        raise ConfigError("--limbs applies to --numeric-mode repro only")
    if spec.steps % spec.checkpoint_interval:
        raise ConfigError(f"--checkpoint-interval {spec.checkpoint_interval} must divide --steps {spec.steps}")
    leaves = spec.steps // spec.checkpoint_interval + 1
    if leaves > MAX_CHECKPOINT_LEAVES:
        raise ConfigError(f"--steps {spec.steps} / --checkpoint-interval {spec.checkpoint_interval} commits {leaves:,} "
                          f"checkpoints a task, more than the {MAX_CHECKPOINT_LEAVES:,} the market records: raise "
                          f"--checkpoint-interval")
    if spec.model == "lm":
        return with_init(plan_text_job(spec, terms, fit_memory))
    data = load_dataset(spec.dataset)
    x_train, y_train, _, _ = split_test(data, spec.seed)
    if spec.shards > len(y_train):
        raise ConfigError(f"--shards {spec.shards} is more than the {len(y_train)} training samples of {spec.dataset}")
    classes = int(max(data.y.max(), data.y_test.max() if data.y_test is not None else 0)) + 1
    if classes < 2:
        raise ConfigError(f"{spec.dataset} has a single class: nothing to learn")
    plan = JobPlan(spec, data, [int(x_train.shape[1]), spec.hidden, classes], terms)
    if spec.pipeline:
        build_job_manifest(spec, plan)  # the split is checked against the model
    if plan.escrow > MAX_ESCROW_WEI:
        raise ConfigError(f"escrow {format_tokens(plan.escrow)} TRAIN is more than the market can hold")
    return with_init(plan)


def with_init(plan: JobPlan) -> JobPlan:
    """``plan`` holding the parameters ``--init`` names, fitted to the job's model (the first
    name, shape or option that does not fit is refused before anything is sent)."""
    if plan.spec.init is None:
        return plan
    from truetrain.export import read_init

    model = build_job_manifest(plan.spec, plan).model
    return replace(plan, init=read_init(plan.spec.init, model, f"--init {plan.spec.init}"))


def initial_checkpoint(manifest, params: dict):
    """Global checkpoint 0 of a job that starts from ``params`` (what its manifest binds)."""
    from truetrain.training.aggregate import global_checkpoint

    return global_checkpoint(manifest, 0, params)


def build_job_manifest(spec: TrainingSpec, plan: JobPlan, refs: dict | None = None):
    """The job's manifest; without ``refs`` (nothing stored yet) stand-in data entries of
    the right shape, so that every field is validated before anything is published."""
    if refs is None:
        stand_in = {"cid": "unpublished", "hash": "0x" + "00" * 32, "samples": 1}
        refs = {"shards": [stand_in] * spec.shards, "test_set": stand_in}
        if spec.init is not None:
            refs["initial_checkpoint"] = {"cid": "unpublished", "hash": stand_in["hash"]}
    return build_manifest(
        name=spec.name, seed=spec.seed, numeric_mode=spec.numeric_mode, limbs=spec.limbs or DEFAULT_LIMBS,
        model=spec.model_spec(plan.widths), optimizer=spec.optimizer_spec(),
        batch_size=spec.batch_size, steps_per_task=spec.steps, checkpoint_interval=spec.checkpoint_interval,
        rounds=spec.rounds, outer=spec.outer, pipeline=spec.pipeline, **refs)


def check_funds(session: Session, plan: JobPlan, approve: bool) -> None:
    """Refuse before any transaction unless the account can pay the escrow."""
    address, market = session.account.address, session.contracts.market.address
    session.require_funds(address, plan.escrow, "the job's escrow")
    if not approve:
        session.require_allowance(address, market, plan.escrow, "the job's escrow")


def ensure_submitter(session: Session) -> str | None:
    """Give the account the submitter role: register it (a small profile on IPFS) or add the
    role to its identity. Returns what was done, or None when nothing was needed."""
    registry, account = session.contracts.registry, session.account
    identity = session.client.call(registry.functions.identityOf(account.address))
    registered, roles = identity[0], identity[1]
    if registered and roles & ROLE_BITS["submitter"]:
        return None
    if registered:
        session.send(registry.functions.setRoles(roles | ROLE_BITS["submitter"]))
        return "added the submitter role"
    profile = json.dumps({"role": "submitter", "address": account.address}, sort_keys=True,
                         separators=(",", ":")).encode()
    stored = session.store.add_bytes(profile)
    # A submitter declares no hardware; the registry checks capability only for workers.
    session.send(registry.functions.register(ROLE_BITS["submitter"], stored.cid, stored.hash, (0, 0, 0, 0, 0)))
    return f"registered as submitter (profile {stored.cid})"


def submit_job(session: Session, plan: JobPlan, *, approve: bool = True) -> dict:
    """Publish shards, test set and manifest, register if needed, escrow and create the job."""
    from web3.logs import DISCARD

    check_funds(session, plan, approve)
    spec, store = plan.spec, session.store
    manifest = build_job_manifest(spec, plan)  # checked before anything is stored
    if spec.model == "lm":
        from truetrain.training.text import publish_text

        refs = publish_text(store, *plan.data)
    else:
        refs = publish_dataset(store, plan.data, num_shards=spec.shards, seed=spec.seed)
    if plan.init is not None:
        start = initial_checkpoint(manifest, plan.init)
        initial = store.add_bytes(start.to_bytes())
        check_cid(initial.cid, "initial checkpoint")
        refs["initial_checkpoint"] = {"cid": initial.cid, "hash": "0x" + start.hash().hex()}  # its commitment
    manifest = build_job_manifest(spec, plan, refs)
    stored = store.add_bytes(manifest.to_bytes())
    check_cid(stored.cid, "manifest")
    registered = ensure_submitter(session)
    contracts = session.contracts
    binding = program_binding(contracts, manifest, shards_of(store, manifest))
    if approve:
        session.send(contracts.token.functions.approve(contracts.market.address, plan.escrow))
    # The expiry counts from the block createJob goes into, not from before the approval.
    params = plan.terms.params(manifest, stored.cid, session.client.w3.eth.block_number)
    receipt = session.send(contracts.market.functions.createJob(params), confirmations=0 if binding else None)
    created = contracts.market.events.JobCreated().process_receipt(receipt.raw, errors=DISCARD)
    job_id = created[0]["args"]["jobId"]
    if binding is not None and not bind_after_create(contracts, session.send, job_id, binding):
        binding = None
    return {"job_id": job_id, "disputes": _disputes(manifest, binding), "escrow_wei": plan.escrow, "escrow": format_tokens(plan.escrow),
            "manifest_cid": stored.cid, "manifest_hash": "0x" + manifest.hash().hex(),
            "shards": spec.shards, "rounds": spec.rounds, "widths": plan.widths, "model": _describe(manifest),
            "stages": spec.stages, "tasks": (spec.shards * spec.stages + 1) * spec.rounds, "identity": registered,
            "initial_checkpoint": manifest.raw.get("initial_checkpoint"), "tx": receipt.tx_hash}


def _disputes(manifest, binding) -> str:
    """How the job's disputes end, for its creation report."""
    if binding is not None:
        return "the chain's one-step recomputation (program bound)"
    why = unbound_reason(manifest) or "the deployment has no StepGame, or a draw came before the binding"
    return f"a referee committee ({why})"


def refuse_unless_submitter(job, address: str, action: str) -> None:
    """Refuse ``action`` on ``job`` (a JobView) unless ``address`` submitted it and it is active."""
    if job.submitter.lower() != address.lower():
        raise Refused(f"job {job.job_id} was submitted by {job.submitter}, not {address}: only its submitter may {action} it")
    if job.status.name != "ACTIVE":
        raise Refused(f"job {job.job_id} is {job.status.name.lower()}, not active: nothing to {action}")


def _describe(manifest) -> str:
    """The model in a few words, for the command's line."""
    model = manifest.model
    if model.kind == "lm":
        from truetrain.training.lm import lm_param_shapes

        params = sum(math.prod(s) for s in lm_param_shapes(model).values())
        return (f"byte-level LM d{model.d_model} x {model.n_layers} layers ({params / 1e6:.2f} M parameters, "
                f"context {model.seq_len})")
    return "MLP " + "-".join(str(w) for w in model.fc_widths)
