"""A job's model in and out of the market: ``truetrain job export`` and ``job submit --init``'s defaults.

``job export`` writes a job's final (or a finished round's) global checkpoint, fetched and
checked against the hash the chain or the manifest holds, in formats the tools users
already run can load (:mod:`truetrain.export`). Heavy modules are imported inside the
functions so that ``--help`` stays quick.
"""

from __future__ import annotations

from pathlib import Path

import click
from click.core import ParameterSource

from truetrain.cli_options import JOB_ID, JobIdCommand, Refused, emit, json_option, session_options

#: --init's GPT-2 config.json fills these job submit flags when they are not given.
INIT_SHAPE_FLAGS = {"d_model": "d_model", "layers": "n_layers", "heads": "n_heads", "seq_len": "seq_len"}


def init_defaults(init: str, values: dict) -> dict:
    """``values`` (job submit's ``model`` and LM shape flags) with those the command line
    did not give taken from ``init``'s GPT-2 config.json, when it is such a folder."""
    from truetrain.export import config_shape, init_config

    config = init_config(init)
    if config is None:
        return values
    ctx = click.get_current_context()

    def given(name: str) -> bool:
        return ctx.get_parameter_source(name) not in (ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)

    out = dict(values)
    if not given("model"):
        out["model"] = "lm"
    shape = config_shape(config)
    for flag, key in INIT_SHAPE_FLAGS.items():
        if not given(flag):
            out[flag] = shape[key]
    return out


def _checkpoint_of(reader, job, manifest, round_index: int | None):
    """(round, CID or None, hash, bytes) of the global checkpoint to export."""
    from truetrain.market import JobStatus

    job_id, rounds = job.job_id, job.rounds
    if round_index is None:
        if job.status != JobStatus.COMPLETED:
            raise Refused(f"job {job_id} is {job.status.name.lower()} ({job.current_round} of {rounds} rounds done), "
                          f"not completed: it has no final model yet (--round N exports the model after a "
                          f"finished round)")
        cid, digest, data = reader.final_checkpoint(job_id)
        return rounds, cid, digest, data
    if round_index > rounds:
        raise Refused(f"job {job_id} has {rounds} round(s): there is no round {round_index}")
    if round_index == 0:
        initial = manifest.initial_checkpoint
        if initial is not None:
            return 0, initial.cid, initial.hash, reader.fetch_checkpoint(initial.cid, initial.hash)
        from truetrain.training import initial_model

        model = initial_model(manifest)  # the seed's model: a pure function of the checked manifest
        return 0, None, model.hash(), model.to_bytes()
    advanced = reader.rounds_advanced(job_id)
    if round_index not in advanced:
        raise Refused(f"job {job_id} has finished {job.current_round} of its {rounds} rounds: no model after round "
                      f"{round_index} yet")
    cid, digest = advanced[round_index]
    return round_index, cid, digest, reader.fetch_checkpoint(cid, digest)


def export_job(reader, job_id: int, out_dir: Path, round_index: int | None = None) -> dict:
    """Write job ``job_id``'s model after ``round_index`` (None: its final model) to
    ``out_dir``; return what was written and where it came from."""
    from truetrain.export import export_model
    from truetrain.training import load_checkpoint

    job = reader.job(job_id)
    manifest = reader.manifest(job_id)
    done, cid, digest, data = _checkpoint_of(reader, job, manifest, round_index)
    checkpoint = load_checkpoint(data, digest)  # the bytes match the recorded hash, checked before use
    created = reader.job_created(job_id)["args"]
    provenance = {"job_id": job_id, "round": done, "rounds": job.rounds,
                  "checkpoint": {"cid": cid, "hash": "0x" + bytes(digest).hex()},
                  "manifest": {"cid": created["manifestCid"], "hash": "0x" + bytes(created["manifestHash"]).hex()}}
    written = export_model(manifest, checkpoint, out_dir, provenance)
    return {**provenance, "model": manifest.model.kind, "out": str(out_dir), **written}


@click.command("export", cls=JobIdCommand)
@click.argument("job_id", type=JOB_ID)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder to write the model to (created; files of the same names are replaced).")
@click.option("--round", "round_index", type=click.IntRange(0),
              help="Export the global model after this round (0: the model the job started from) "
                   "[default: the final model of a completed job].")
@json_option
@session_options()
def job_export(session, as_json, job_id, out_dir, round_index):
    """Write a job's model for other tools: a language model as a transformers GPT-2 folder
    (config.json, model.safetensors, a byte tokenizer), an MLP or CNN as model.safetensors
    with config.json and model.py, its PyTorch module. The checkpoint is checked against the
    hash the chain records; the tensors are its bits, never approximated."""
    report = export_job(session.reader, job_id, out_dir, round_index)
    which = "the final model" if round_index is None else (
        "the initial model" if report["round"] == 0 else f"the model after round {report['round']}")
    source = f"checkpoint {report['checkpoint']['cid']}" if report["checkpoint"]["cid"] else "the seed's initial model"
    names = ", ".join(Path(f).name for f in report["files"])
    if report["model"] == "lm":
        how = f"a transformers GPT-2 folder: GPT2LMHeadModel.from_pretrained({str(out_dir)!r}) loads it"
    else:
        how = (f"safetensors with its PyTorch module: TruetrainClassifier.from_pretrained({str(out_dir)!r}) "
               f"from model.py loads it")
    emit(report, as_json, f"job {job_id}: {which} ({report['round']} of {report['rounds']} rounds; {source}, "
                          f"hash {report['checkpoint']['hash']} checked)\nwrote {names} to {out_dir}: {how}")
