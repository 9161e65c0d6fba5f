"""What training a model takes in memory, and the worker's decision to decline an offer
whose model it cannot hold (the job's terms are the submitter's word; the model is not)."""

from __future__ import annotations

import json
import subprocess
import sys

from truetrain.hardware import DEVICE_CPU, DEVICE_CUDA
from truetrain.market.jobs import JobTerms
from truetrain.training.lm import parse_lm_spec
from truetrain.training.memory import RUNTIME_MIB, offer_refusal, training_memory_mib

LM = {"kind": "lm", "d_model": 256, "n_layers": 4, "n_heads": 4, "seq_len": 128}


def test_offerRefusal_device_terms_andTheModelItself(digits1, make_manifest):
    manifest = make_manifest(*digits1)  # the digits MLP, batch 64
    need = training_memory_mib(manifest.model, manifest.batch_size)
    assert RUNTIME_MIB < need < RUNTIME_MIB + 16
    terms = JobTerms(1, 0, 0, memory_mib=256)
    assert offer_refusal(terms, manifest, DEVICE_CPU, need) is None
    assert offer_refusal(JobTerms(1, 0, 0, device_class=DEVICE_CUDA), manifest, DEVICE_CPU, 4096) == (
        "the job asks for device class 2 and 1,024 MiB")
    assert offer_refusal(JobTerms(1, 0, 0), manifest, DEVICE_CPU, 1000) == (
        "the job asks for device class 1 and 1,024 MiB")
    # the terms understate what the model needs: the worker goes by the model
    assert offer_refusal(terms, manifest, DEVICE_CPU, need - 1) == (
        f"the job's model needs about {need:,} MiB to train (its terms say 256); this worker declares {need - 1:,}")


def test_trainingMemory_growsWithModelAndBatch():
    base = training_memory_mib(parse_lm_spec(LM), 8)
    assert training_memory_mib(parse_lm_spec(LM), 16) > base
    assert training_memory_mib(parse_lm_spec({**LM, "d_model": 512}), 8) > base
    assert training_memory_mib(parse_lm_spec({**LM, "n_layers": 8}), 8) > base


_PEAK = """
import json, torch
from truetrain.training.gemm_check import engine_for
from truetrain.training.lm import TransformerLM, lm_init_params, parse_lm_spec
from truetrain.training.ops import repro_gradients
spec = parse_lm_spec(json.loads(%r))
model = TransformerLM(spec, lm_init_params(spec, 1))
data = torch.randint(0, 256, (8, spec.seq_len + 1), generator=torch.Generator().manual_seed(0))
stock = TransformerLM(spec, lm_init_params(spec, 1))
stock.loss(data[:, :-1], data[:, 1:]).backward()
repro_gradients(model, data[:, :-1], data[:, 1:], engine_for("cpu"), 2)
# VmHWM, this process's own peak: ru_maxrss also counts the parent's resident size at the fork
# (Linux keeps the old memory's high-water mark across exec): a large pytest process read 982 MiB
print(next(int(line.split()[1]) for line in open('/proc/self/status') if line.startswith('VmHWM:')) // 1024)
"""


def test_trainingMemory_boundsTheMeasuredPeak_ofAnLMStep():
    """A fresh process trains one step of the default LM in both modes (batch 8 x 128):
    its peak resident memory stays under the estimate a worker goes by."""
    out = subprocess.run([sys.executable, "-c", _PEAK % json.dumps(LM)], capture_output=True, text=True,
                         check=True, timeout=300)
    peak = int(out.stdout.split()[-1])
    assert 0 < peak <= training_memory_mib(parse_lm_spec(LM), 8), peak
