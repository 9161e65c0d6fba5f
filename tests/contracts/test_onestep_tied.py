"""The tied embedding's gradient on the chain (docs/onestep.md): the LM's ``tok_emb`` is the
input gather and the output projection, so its gradient has two contributions, each rounded
on its own (the head's weight gradient, the gather's scatter: an ``exact_sum`` application)
and then added (``GradBook.result``): one float32 ``add``, the elementwise add's one-step
(OneStepElementwise.addElement). On a small LM's repro steps (whole batches and micro-batches,
eager and the C kernels, 2 and 3 limbs), bit for bit: the engine's ``tok_emb`` gradient is
the chain's add of the two contributions at every element (OneStepElementwiseHarness.addBatch,
12,288 elements) and the reference's (truetrain/numerics/elementwise.py), the scatter
contribution is the chain's exact sum of the gradient reaching the gather
(OneStepExactSumHarness.scatterSums) and the reference's (exact_sum.py); then single
elements opened against their roots."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.contracts.onestep_kinds import AT_LEAST, descriptor, opening as _open, tensor_of
from truetrain.numerics.elementwise import add
from truetrain.numerics.exact_sum import scatter_sums
from truetrain.numerics.ieee import bits32
from truetrain.numerics.tensor_merkle import TensorTree
from truetrain.training.intgemm import GemmEngine
from truetrain.training.lm import TransformerLM, lm_init_params, parse_lm_spec
from truetrain.training.ops import ReproStep, repro_gradients
from truetrain.training.ops.book import GradBook

SPEC = parse_lm_spec({"kind": "lm", "d_model": 16, "n_layers": 1, "n_heads": 2, "seq_len": 16})
VOCAB = SPEC.vocab
# (engine, limbs, sequences a micro-batch (None: the batch whole), seed)
RUNS = [(GemmEngine("cpu", "float64"), 2, None, 1), (GemmEngine("cpu", "int8", fuse=True), 3, None, 2),
        (GemmEngine("cpu", "int8", small_product=0), 2, 2, 3)]


class _Recording(GradBook):
    """The engine's book, keeping what its scatters add (the gradient reaching the gather and
    its ids)."""

    def __init__(self, *a):
        super().__init__(*a)
        self.scattered: list[tuple[torch.Tensor, torch.Tensor]] = []

    def scatter(self, name, g, index, num, site=""):
        if name == "tok_emb" and self.mode in ("add", "both"):
            self.scattered.append((g.detach().clone(), index.clone()))
        super().scatter(name, g, index, num, site)


def _step(engine: GemmEngine, limbs: int, micro: int | None, seed: int):
    """``(head, scatter, final, g, ids)``: the two contributions (float32 bits, (256, d)), the
    engine's ``tok_emb`` gradient, the gradient reaching the gather and its ids, from one repro
    step of the LM (as ``repro_gradients`` runs it, with a recording book)."""
    gen = torch.Generator().manual_seed(seed)
    data = torch.randint(0, VOCAB, (4, SPEC.seq_len + 1), generator=gen)
    ids, targets = data[:, :-1], data[:, 1:]
    model = TransformerLM(SPEC, lm_init_params(SPEC, seed))
    step = ReproStep(engine, limbs, targets.numel())
    step.book = _Recording(engine, limbs, targets.numel())
    slices = [(0, 4)] if micro is None else [(i, i + micro) for i in range(0, 4, micro)]
    for mode in (("both",) if micro is None else ("observe", "add")):
        step.book.mode = mode
        for lo, hi in slices:
            step.offset = lo
            model.loss(ids[lo:hi], targets[lo:hi], step, targets.numel(), []).backward()
    final = step.book.result()["tok_emb"]
    assert torch.equal(final, repro_gradients(model, ids, targets, engine, limbs, micro)[0]["tok_emb"])
    parts = step.book._parts["tok_emb"]
    assert [site[0] for site in parts] == ["r" if micro is None else "w", "s"]  # the head first, then the gather
    solo = []
    for site, part in parts.items():  # each contribution rounded on its own, as result() rounds it
        book = GradBook(engine, limbs, targets.numel())
        book._parts = {"tok_emb": {site: part}}
        solo.append(bits32(book.result()["tok_emb"].numpy()))
    g = torch.cat([s[0] for s in step.book.scattered])
    index = torch.cat([s[1] for s in step.book.scattered])
    return solo[0], solo[1], bits32(final.numpy()), bits32(g.numpy()), index.numpy()


@pytest.fixture(scope="module")
def steps():
    return [_step(*run) for run in RUNS]


def test_tiedGradient_isTheChainsAddOfItsContributions(OneStepElementwiseHarness, OneStepExactSumHarness, accounts,
                                                      steps):
    adder = OneStepElementwiseHarness.deploy({"from": accounts[0]})
    summer = OneStepExactSumHarness.deploy({"from": accounts[0]})
    total = 0
    for head, scatter, final, g, ids in steps:
        chain = np.array(adder.addBatch.call(head.astype(">u4").tobytes(), scatter.astype(">u4").tobytes()), np.uint32)
        assert (chain == final.reshape(-1)).all() and (add(head, scatter) == final.reshape(-1)).all()
        assert (head != 0).any() and (scatter != 0).any() and (head != final).any() and (scatter != final).any()
        gt = g.T.copy()  # (d, rows): the transposed gradient the exact sum reads
        for j in range(0, gt.shape[0], 2):  # two columns an eth_call (its gas)
            sums = np.array(summer.scatterSums.call(len(ids), VOCAB, gt[j:j + 2].astype(">u4").tobytes(),
                                                    ids.astype(">u4").tobytes()), np.uint32)
            assert (sums.reshape(VOCAB, 2) == scatter[:, j:j + 2]).all(), j
        assert (scatter_sums(gt, ids, VOCAB) == scatter).all()
        total += chain.size
    assert total >= AT_LEAST


def test_tiedGradient_elementsOpenedAgainstTheirRoots(OneStepElementwiseHarness, OneStepExactSumHarness, accounts,
                                                      steps):
    adder = OneStepElementwiseHarness.deploy({"from": accounts[0]})
    summer = OneStepExactSumHarness.deploy({"from": accounts[0]})
    head, scatter, final, g, ids = steps[2]
    d = SPEC.d_model
    th, ts = TensorTree(tensor_of(head)), TensorTree(tensor_of(scatter))
    descs = [descriptor(th, VOCAB, d), descriptor(ts, VOCAB, d)]
    tg = TensorTree(tensor_of(g.T.copy()))
    ti = TensorTree(torch.from_numpy(ids.astype(np.int32)).view(torch.float32))
    n = len(ids)
    for row, j in ((int(ids[0]), 0), (int(ids[-1]), d - 1), (VOCAB - 1, 5)):
        index = row * d + j
        opens = [_open(th, index), _open(ts, index)]
        assert adder.addElement.call(descs, index, opens) == int(final.reshape(-1)[index]), (row, j)
        got = summer.scatterElement.call([descriptor(tg, d, n), descriptor(ti, 1, n)], VOCAB, row, j,
                                         [_open(tg, j * n, n), _open(ti, 0, n)])
        assert got == int(scatter.reshape(-1)[index]), (row, j)
