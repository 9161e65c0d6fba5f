"""Pipeline-parallel repro training: a model split by layers into stages, each stage's
step a pure function of hash-addressed inputs, a GPipe schedule whose result equals the
single-process run bit for bit, and the replay of one stage alone (issue 17).

* ``split.py``: the plan (explicit or balanced by parameter count), stage modules, the
  tied embedding's replica, stage checkpoints;
* ``wire.py``: messages (activations, gradients, the tied gradient, the global norm's
  parts) as keccak-addressed bytes, the per-stage logs, divergence and broken links;
* ``stage.py``: one stage's step in phases (batch-wide maxima across micro-batches,
  exact global-norm clipping across stages);
* ``run.py``: the GPipe schedule in one process, a pipelined task;
* ``replay.py``: one stage replayed alone from its committed inputs, and its audit;
* ``transport.py``: the message store on an IPFS node, and the rendezvous board where
  senders post each message's address and CID;
* ``node.py``: a pipelined task as one OS process per stage over that transport.
"""

from .node import StageJob, merge_results, result_log, run_stage, run_stages, stage_step, train_stage
from .replay import audit_stage, first_mismatch, replay_micro_batch, replay_stage, replay_stage_run
from .run import PipelineRun, pipeline_step, run_pipeline_task, train_pipelined
from .split import (StagePlan, build_stage_module, merge_checkpoints, model_units, split_at, split_by_params,
                    stage_checkpoint)
from .stage import Stage, micro_slices
from .transport import IpfsMessageStore, Rendezvous
from .wire import (Divergence, Entry, Kind, Message, MessageStore, StageLog, broken_links, entry_leaf,
                   first_divergence, log_leaves, log_root)

__all__ = ["Divergence", "Entry", "IpfsMessageStore", "Kind", "Message", "MessageStore", "PipelineRun", "Rendezvous",
           "Stage", "StageJob", "StageLog", "StagePlan", "audit_stage", "broken_links", "build_stage_module",
           "entry_leaf", "first_divergence", "first_mismatch", "log_leaves", "log_root", "merge_checkpoints",
           "merge_results", "micro_slices", "model_units", "pipeline_step", "replay_micro_batch", "replay_stage",
           "replay_stage_run", "result_log", "run_pipeline_task", "run_stage", "run_stages", "split_at", "split_by_params",
           "stage_checkpoint", "stage_step", "train_pipelined", "train_stage"]
