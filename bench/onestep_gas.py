"""Gas of the one-step elements for the default LM (d256 x 4 layers, batch 8 x 128 = 1,024
tokens, vocabulary 256) and the digits MLP (64-128-10, batch 32), the whole transaction
(eth_estimateGas: 21,000 + calldata + the inputs opened by range proofs + the arithmetic), on
a fresh Anvil. Issue 28 keeps every transaction at or under 10 M gas.

* the linear element (contracts/numerics/OneStepGemm.sol, OneStepGemmHarness.linearElement):
  both rows and the bias opened, the quantisation and exact sum of K products, one rounding;
  the gas depends on K (the rows opened) and the trees' depths, not on the values;
* the other kinds (contracts/numerics/OneStepOptim.sol and OneStepElementwise.sol, their
  harnesses): one element of each input opened (and the state's 0-dim scalars), the
  engine's float32 / float64 operations or index map; the depth is the tensor's (for the
  updates the largest parameter: the LM's FFN weight, 1,024 x 256; the MLP's first layer,
  128 x 64), an aggregation's gas grows with its contributions;
* the clip factor (OneStepClip.sol): a range of 16,384 gradient values opened for its largest
  magnitude or its sum of squares (with every range's maximum), and the combine over the
  default LM's 232 ranges; 2x2 max pooling (OneStepPool.sol) on the digits CNN's first map.

    .venv/bin/python bench/onestep_gas.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from tests.contracts.float_chain import harness_on_devnet  # noqa: E402
from truetrain.numerics.clip import ranges  # noqa: E402
from truetrain.numerics.elementwise import permute_source  # noqa: E402
from truetrain.numerics.tensor_merkle import TensorTree  # noqa: E402
from truetrain.training.lm import lm_param_shapes, parse_lm_spec  # noqa: E402

LIMIT = 10_000_000
TOKENS, DIGITS_BATCH = 8 * 128, 32
# (model, product, M, K, N): C (M, N) = A (M, K) @ Bt (N, K).T; the backward's products
# read the transposed operands as tensors of their own in the trace
PRODUCTS = [
    ("LM", "attention q/k/v/out, FFN up (x @ W.T)", TOKENS, 256, 1024),
    ("LM", "tied head (x @ E.T)", TOKENS, 256, 256),
    ("LM", "FFN down (h @ W.T)", TOKENS, 1024, 256),
    ("LM", "input gradient of FFN up (g @ W)", TOKENS, 1024, 256),
    ("LM", "weight gradient's shape (K = 1,024 tokens)", 1024, TOKENS, 256),
    ("MLP", "fc1 (x @ W1.T)", DIGITS_BATCH, 64, 128),
    ("MLP", "fc2 (h @ W2.T)", DIGITS_BATCH, 128, 10),
    ("MLP", "input gradient of fc2 (g @ W2)", DIGITS_BATCH, 10, 128),
    ("MLP", "weight gradient's shape (K = 32 samples)", 128, DIGITS_BATCH, 64),
]


def _opening(tree: TensorTree, start: int, count: int):
    chunks, proof = tree.open(start, count)
    return chunks, ["0x" + p.hex() for p in proof]


def measure(harness, w3, m: int, k: int, n: int, limbs: int) -> tuple[int, int, int]:
    """``(gas, calldata bytes, proof nodes)`` of one element's transaction (the middle one)."""
    torch.manual_seed(m + k + n)
    a, bt, bias = torch.randn(m, k), torch.randn(n, k), torch.randn(n)
    ta, tb, tc = TensorTree(a), TensorTree(bt), TensorTree(bias)
    i, j = m // 2, n // 2
    ra, rb, rc = _opening(ta, i * k, k), _opening(tb, j * k, k), _opening(tc, j, 1)
    fn = harness.functions.linearElement(
        ("0x" + ta.root.hex(), m, k), ("0x" + tb.root.hex(), n, k), ("0x" + tc.root.hex(), 1, n),
        limbs, i, j, ra, rb, rc)
    gas, size = tx_gas(w3, fn)
    return gas, size, sum(len(r[1]) for r in (ra, rb, rc))


# (model, kind, tensor shape, what, contributions): the LM trains with AdamW (betas 0.9 /
# 0.95, clip norm 1: the clipped path), the MLP with SGD and momentum; the LM's activations
# are (8 x 128 tokens, d 256), its qkv (8, 128, 3, 4 heads, 64)
LM_PARAM, MLP_PARAM, LM_ACT, MLP_HIDDEN = (1024, 256), (128, 64), (1024, 256), (32, 128)
UPDATES = [
    ("LM", "AdamW, clipped (p, m, v)", LM_PARAM, "adam", 0),
    ("LM", "Adam, no clip", LM_PARAM, "adam-plain", 0),
    ("MLP", "SGD with momentum (p, buf)", MLP_PARAM, "sgd", 0),
    ("MLP", "FedAvg mean", MLP_PARAM, "fedavg", 4),
    ("LM", "DiLoCo outer step (Nesterov)", LM_PARAM, "diloco", 2),
    ("LM", "DiLoCo outer step (Nesterov)", LM_PARAM, "diloco", 8),
    ("LM", "DiLoCo outer step (Nesterov)", LM_PARAM, "diloco", 32),
    ("LM", "DiLoCo outer step (Nesterov)", LM_PARAM, "diloco", 128),
]
ELEMENTWISE = [
    ("MLP", "ReLU (h, mask)", MLP_HIDDEN, "relu", 0),
    ("MLP", "ReLU backward (g * mask + 0)", MLP_HIDDEN, "mask", 0),
    ("LM", "embedding sum (tokens + positions)", LM_ACT, "add-pos", 0),
    ("LM", "residual add", LM_ACT, "add", 0),
    ("LM", "head split (qkv permute 2,0,3,1,4)", (8, 128, 3, 4, 64), "permute", 0),
    ("LM", "transpose of W (input gradient)", (1024, 256), "transpose", 0),
    ("LM", "embedding gather (tok_emb[ids])", (1024, 256), "embedding", 0),
    ("LM", "dropout (x * mask)", LM_ACT, "dropout", 0),
]
GELU = [("LM", "GELU (FFN hidden)", (1024, 1024), "gelu", 0),
        ("LM", "GELU backward (FFN hidden)", (1024, 1024), "gelu-backward", 0)]
LAYERNORM = [("LM", "LayerNorm (a row of d = 256)", LM_ACT, "layernorm", 0),
             ("-", "LayerNorm (a row of 64)", (32, 64), "layernorm", 0),
             ("LM", "LayerNorm backward (dx, g * xhat)", LM_ACT, "layernorm-backward", 0)]
# the summed tensors transposed: (columns, batch rows); the scatter's table has 256 rows
EXACT_SUMS = [("LM", "FFN up bias gradient (column sum of 1,024 tokens)", (1024, TOKENS), "columns", 0),
              ("LM", "LayerNorm gain gradient (column sum)", (256, TOKENS), "columns", 0),
              ("LM", "token embedding gradient (scatter of 1,024 rows)", (256, TOKENS), "scatter", 256),
              ("MLP", "fc1 bias gradient (column sum of 32 samples)", (128, DIGITS_BATCH), "columns", 0)]
# scores (batch x heads x T, T) = (8 x 4 x 128, 128); the last row of a sequence sees all T
SOFTMAX = [("LM", "softmax row sum (T = 128, whole row)", (8 * 4 * 128, 128), "row-sum", 0),
           ("LM", "softmax element (row and S opened)", (8 * 4 * 128, 128), "softmax", 0),
           ("LM", "softmax backward (rows of p and dp)", (8 * 4 * 128, 128), "softmax-backward", 0)]
# logits (rows, classes); the partial sums cut a row into blocks of 128 classes (a whole row
# of 256 is 11.4 M gas)
XENT = [("LM", "cross-entropy partial sum (128 of 256 classes)", (TOKENS, 256), "partial", 128),
        ("LM", "cross-entropy gradient element", (TOKENS, 256), "grad", 128),
        ("LM", "cross-entropy loss of a row", (TOKENS, 256), "loss", 128),
        ("MLP", "cross-entropy partial sum (whole row of 10)", (DIGITS_BATCH, 10), "partial", 10),
        ("MLP", "cross-entropy gradient element", (DIGITS_BATCH, 10), "grad", 10)]

# the clip factor: every LM gradient (d256 x 4 layers, seq 128) cut into ranges of 16,384
# values; a range of the FFN weight (1,024 x 256), the combine over every range
CLIP_WIDTH = 16_384
CLIP = [("LM", "clip: a range's largest magnitude (16,384 values)", (1024, 256), "max", 0),
        ("LM", "clip: a range's sum of squares (16,384 values, the maxima)", (1024, 256), "sum", 0),
        ("LM", "clip: norm and factor (every range's maximum and sum)", (1024, 256), "factor", 0)]
# the digits CNN's first pooling: maps (batch 32, 28, 28, 8 channels)
POOL = [("CNN", "2x2 max pool (out, mask: four elements opened)", (32, 28, 28, 8), "pool", 0),
        ("CNN", "2x2 max pool backward (g[o] * mask + 0)", (32, 28, 28, 8), "unpool", 0)]


def _f32(v: float) -> int:
    return int(np.float32(v).view(np.uint32))


def _opened(tensors: list[torch.Tensor], index: int):
    """Descriptors and openings of element ``index`` of each tensor (0 of a 0-dim one)."""
    descs, opens = [], []
    for t in tensors:
        tree = TensorTree(t)
        rows = t.shape[0] if t.dim() else 1
        descs.append(("0x" + tree.root.hex(), rows, t.numel() // rows))
        opens.append(_opening(tree, index if t.dim() else 0, 1))
    return descs, opens


def update_call(harness, kind: str, shape: tuple[int, int], workers: int):
    """The harness function call of one update or aggregation element, and its proof nodes."""
    torch.manual_seed(shape[0] + workers)
    index = shape[0] * shape[1] // 2 + 1
    if kind.startswith("adam"):
        clipped = kind == "adam"
        ts = [torch.randn(shape) for _ in range(3)] + [torch.rand(shape), torch.tensor(0.9**7), torch.tensor(0.95**7),
                                                      torch.tensor(0.5)]
        descs, opens = _opened(ts, index)
        attrs = (_f32(3e-4), _f32(0.1), _f32(0.9), _f32(0.95), _f32(1e-8), clipped, clipped)
        fn = harness.functions.adamElement(attrs, descs, index, opens)
    elif kind == "sgd":
        descs, opens = _opened([torch.randn(shape) for _ in range(3)], index)
        fn = harness.functions.sgdElement((_f32(0.1), _f32(5e-4), _f32(0.9)), descs, index, opens)
    else:
        descs, opens = _opened([torch.randn(shape) for _ in range(2 + workers)], index)
        attrs = (kind == "diloco", _f32(0.7), _f32(0.9), True)
        fn = harness.functions.aggregateElement(attrs, [1024 + w for w in range(workers)], descs, index, opens)
    return fn, sum(len(o[1]) for o in opens)


def elementwise_call(harness, kind: str, shape: tuple[int, ...], _workers: int = 0):
    """The harness function call of one elementwise element, and its proof nodes."""
    torch.manual_seed(len(kind))
    x = torch.randn(shape)
    index = x.numel() // 2 + 1
    f = harness.functions
    if kind in ("relu", "dropout"):
        descs, opens = _opened([x], index)
        if kind == "relu":
            return f.reluElement(descs[0], index, opens[0]), len(opens[0][1])
        attrs = (bytes(range(32)), b"blocks.0.attn", int(np.float64(0.1).view(np.uint64)), 0)
        return f.dropoutElement(attrs, descs[0], index, opens[0]), len(opens[0][1])
    if kind in ("mask", "add", "add-pos"):
        other = x[:128] if kind == "add-pos" else (x > 0).float() if kind == "mask" else torch.randn(shape)
        descs, opens = _opened([x], index)
        d2, o2 = _opened([other], index % other.numel())
        descs, opens = descs + d2, opens + o2
        fn = f.applyMaskElement if kind == "mask" else f.addElement
        return fn(descs, index, opens), len(opens[0][1]) + len(opens[1][1])
    if kind in ("permute", "transpose"):
        perm = (2, 0, 3, 1, 4) if kind == "permute" else (1, 0)
        descs, opens = _opened([x.reshape(shape[0], -1)], permute_source(shape, perm, index))
        return f.permuteElement(descs[0], list(shape), list(perm), index, opens[0]), len(opens[0][1])
    ids = torch.randint(0, 256, (shape[0],), dtype=torch.int32)
    table = torch.randn(256, shape[1])
    r, c = shape[0] // 2, 7
    di, oi = _opened([ids.view(torch.float32).reshape(1, -1)], r)
    dt, ot = _opened([table], int(ids[r]) * shape[1] + c)
    return f.embeddingElement(di[0], dt[0], r, c, [oi[0], ot[0]]), len(oi[0][1]) + len(ot[0][1])


def gelu_call(harness, kind: str, shape: tuple[int, int], _workers: int = 0):
    """The harness function call of one GELU element (forward or backward)."""
    torch.manual_seed(3)
    x, g = torch.randn(shape), torch.randn(shape)
    index = x.numel() // 2 + 1
    if kind == "gelu":
        descs, opens = _opened([x], index)
        return harness.functions.geluElement(descs[0], index, opens[0]), len(opens[0][1])
    descs, opens = _opened([x, g], index)
    return harness.functions.geluBackwardElement(descs, index, opens), sum(len(o[1]) for o in opens)


def layernorm_call(harness, kind: str, shape: tuple[int, int], _workers: int = 0):
    """The harness function call of one LayerNorm element: the whole row opened (and for the
    backward the gradient's row and the whole gain)."""
    torch.manual_seed(4)
    rows, n = shape
    x, w, b = torch.randn(shape), torch.randn(n), torch.randn(n)
    i, j = rows // 2, n // 2
    tx = TensorTree(x)
    eps = int(np.float64(1e-5).view(np.uint64))
    if kind == "layernorm-backward":
        tg, tw = TensorTree(torch.randn(shape)), TensorTree(w)
        opens = [_opening(tx, i * n, n), _opening(tg, i * n, n), _opening(tw, 0, n)]
        descs = [("0x" + t.root.hex(), r, n) for t, r in ((tx, rows), (tg, rows), (tw, 1))]
        return harness.functions.layerNormBackwardElement(descs, eps, i, j, opens), sum(len(o[1]) for o in opens)
    dw, ow = _opened([w], j)
    db, ob = _opened([b], j)
    row = _opening(tx, i * n, n)
    descs = [("0x" + tx.root.hex(), rows, n), dw[0], db[0]]
    fn = harness.functions.layerNormElement(descs, eps, i, j, [row, ow[0], ob[0]])
    return fn, len(row[1]) + len(ow[0][1]) + len(ob[0][1])


def exact_sum_call(harness, kind: str, shape: tuple[int, int], num: int):
    """The harness function call of one exact-sum element: a transposed row opened whole (and
    for the scatter every id)."""
    torch.manual_seed(5)
    cols, n = shape
    vt = TensorTree(torch.randn(shape))
    j, row = cols // 2, _opening(vt, (cols // 2) * n, n)
    desc = ("0x" + vt.root.hex(), cols, n)
    if kind == "columns":
        return harness.functions.columnSumElement(desc, j, row), len(row[1])
    ids = TensorTree(torch.randint(0, num, (n,), dtype=torch.int32).view(torch.float32))
    opens = [row, _opening(ids, 0, n)]
    fn = harness.functions.scatterElement([desc, ("0x" + ids.root.hex(), 1, n)], num, 7, j, opens)
    return fn, len(row[1]) + len(opens[1][1])


def softmax_call(harness, kind: str, shape: tuple[int, int], _workers: int = 0):
    """The harness function call of one softmax element, on the last row of a sequence."""
    torch.manual_seed(6)
    rows, t = shape
    r, j = rows - 1, t // 2
    s = TensorTree(torch.randn(shape))
    desc, row = ("0x" + s.root.hex(), rows, t), _opening(s, r * t, t)
    if kind == "row-sum":
        return harness.functions.rowSumElement(desc, r, row), len(row[1])
    if kind == "softmax":
        sums = TensorTree(torch.full((rows,), 37.5, dtype=torch.float64))
        opens = [row, _opening(sums, 2 * r, 2)]
        fn = harness.functions.softmaxElement([desc, ("0x" + sums.root.hex(), rows, 2)], r, j, opens)
        return fn, len(row[1]) + len(opens[1][1])
    dp = TensorTree(torch.randn(shape))
    opens = [row, _opening(dp, r * t, t)]
    fn = harness.functions.softmaxBackwardElement([desc, ("0x" + dp.root.hex(), rows, t)], _f32(0.125), r, j, opens)
    return fn, len(row[1]) + len(opens[1][1])


def xent_call(harness, kind: str, shape: tuple[int, int], width: int):
    """The harness function call of one cross-entropy element: the row opened whole (and for
    the gradient and the loss the row's partial sums and its label)."""
    torch.manual_seed(7)
    rows, c = shape
    r, blocks = rows // 2, (c + width - 1) // width
    x = TensorTree(torch.randn(shape))
    desc, row = ("0x" + x.root.hex(), rows, c), _opening(x, r * c, c)
    if kind == "partial":
        return harness.functions.partialSumElement(desc, width, r, 0, row), len(row[1])
    parts = TensorTree(torch.full((rows, blocks), 2.0**45, dtype=torch.float64))
    labels = TensorTree(torch.randint(0, c, (rows,), dtype=torch.int32).view(torch.float32))
    descs = [desc, ("0x" + parts.root.hex(), rows, 2 * blocks), ("0x" + labels.root.hex(), 1, rows)]
    opens = [row, _opening(parts, 2 * blocks * r, 2 * blocks), _opening(labels, r, 1)]
    fn = (harness.functions.gradElement(descs, rows, r, c // 2, opens) if kind == "grad"
          else harness.functions.lossElement(descs, r, opens))
    return fn, sum(len(o[1]) for o in opens)


# row scales: a row opened whole; the weight gradient: aᵀ (in, tokens) and gᵀ (out, tokens)
# rows and the batch's row scales opened whole (K = the batch); attention's products: the
# scores (batch x heads, T, head_dim) @ keys, the probabilities (.., T, T) @ values transposed
QUANT = [("LM", "row scale (a row of d = 256)", (TOKENS, 256), "row-scale", 0),
         ("LM", "row scale (a row of 1,024: FFN hidden)", (TOKENS, 1024), "row-scale", 0),
         ("LM", "weight gradient, FFN down (K = 1,024 tokens)", (1024, 256, TOKENS), "weight-grad", 0),
         ("LM", "weight gradient, qkv (K = 1,024 tokens)", (256, 768, TOKENS), "weight-grad", 0),
         ("MLP", "weight gradient, fc1 (K = 32 samples)", (64, 128, DIGITS_BATCH), "weight-grad", 0),
         ("LM", "attention scores (q @ k.T * scale, K = 64)", (32, 128, 128, 64), "bmm", 0),
         ("LM", "attention output (p @ v, K = T = 128)", (32, 128, 64, 128), "bmm", 0),
         ("LM", "attention dk (ds.T @ q, K = 128)", (32, 128, 64, 128), "bmm", 0)]


def quant_call(harness, kind: str, shape: tuple[int, ...], _workers: int = 0):
    """The harness function call of one quantised-product element: its rows opened whole."""
    torch.manual_seed(8)
    if kind == "row-scale":
        rows, k = shape
        x = TensorTree(torch.randn(shape))
        row = _opening(x, (rows // 2) * k, k)
        return harness.functions.rowScaleElement(("0x" + x.root.hex(), rows, k), 2, rows // 2, row), len(row[1])
    if kind == "weight-grad":
        nin, nout, m = shape
        trees = [TensorTree(torch.randn(nin, m)), TensorTree(torch.randn(nout, m)),
                 TensorTree(torch.ldexp(torch.ones(m), torch.randint(-30, -10, (m,))))]
        descs = [("0x" + t.root.hex(), r, m) for t, r in zip(trees, (nin, nout, 1))]
        opens = [_opening(trees[0], (nin // 2) * m, m), _opening(trees[1], (nout // 2) * m, m),
                 _opening(trees[2], 0, m)]
        return harness.functions.weightGradElement(descs, 2, nout // 2, nin // 2, opens), sum(len(o[1]) for o in opens)
    nb, m, p, k = shape
    a, bt = TensorTree(torch.randn(nb * m, k)), TensorTree(torch.randn(nb * p, k))
    n, i, j = nb // 2, m // 2, p // 2
    opens = [_opening(a, (n * m + i) * k, k), _opening(bt, (n * p + j) * k, k)]
    fn = harness.functions.bmmElement(("0x" + a.root.hex(), nb * m, k), ("0x" + bt.root.hex(), nb * p, k),
                                      (nb, 2, _f32(0.125)), n, i, j, opens)
    return fn, sum(len(o[1]) for o in opens)


def clip_call(harness, kind: str, shape: tuple[int, int], _workers: int = 0):
    """The harness function call of one clip element: a range of a gradient opened (and the
    maxima whole), or the combine's maxima and sums opened whole."""
    spec = parse_lm_spec({"kind": "lm", "d_model": 256, "n_layers": 4, "n_heads": 4, "seq_len": 128})
    sizes = [int(np.prod(s)) for s in lm_param_shapes(spec).values()]
    parts, count = len(ranges(sizes, CLIP_WIDTH)), sum(sizes)
    torch.manual_seed(8)
    maxima = TensorTree(torch.rand(parts) * 4)
    dm, om = ("0x" + maxima.root.hex(), 1, parts), _opening(maxima, 0, parts)
    if kind == "factor":
        sums = TensorTree(torch.full((parts,), 2.0**40, dtype=torch.float64))
        opens = [om, _opening(sums, 0, 2 * parts)]
        fn = harness.functions.clipElement([dm, ("0x" + sums.root.hex(), parts, 2)], count,
                                           int(np.float64(1.0).view(np.uint64)), opens)
        return fn, sum(len(o[1]) for o in opens)
    g = TensorTree(torch.randn(shape))
    dg, og = ("0x" + g.root.hex(), *shape), _opening(g, 3 * CLIP_WIDTH, CLIP_WIDTH)
    if kind == "max":
        return harness.functions.maxPartialElement(dg, 3 * CLIP_WIDTH, CLIP_WIDTH, og), len(og[1])
    fn = harness.functions.sumPartialElement([dg, dm], 3 * CLIP_WIDTH, CLIP_WIDTH, count, [og, om])
    return fn, len(og[1]) + len(om[1])


def pool_call(harness, kind: str, shape: tuple[int, ...], _workers: int = 0):
    """The harness function call of one pooling element (its window's four elements opened),
    or of one backward element (the pooled gradient's and the mask's elements)."""
    torch.manual_seed(9)
    b, h, w, c = shape
    a = TensorTree(torch.relu(torch.randn(shape)))
    i = b * h * w * c // 8 + 3  # a pooled element in the middle
    if kind == "pool":
        first = ((2 * (i // c // (w // 2))) * w + 2 * (i // c % (w // 2))) * c + i % c
        opens = [_opening(a, first + ((t >> 1) * w + (t & 1)) * c, 1) for t in range(4)]
        fn = harness.functions.poolElement(("0x" + a.root.hex(), b * h * w, c), shape, i, opens)
        return fn, sum(len(o[1]) for o in opens)
    pooled = b * h * w * c // 4
    g, mask = TensorTree(torch.randn(pooled)), TensorTree((torch.rand(pooled, 4) < 0.25).float())
    j = 2 * i + w * c + 1  # an element on an odd row and column
    src = ((j // c // w // 2) * (w // 2) + j // c % w // 2) * c + j % c
    k = 2 * (j // c // w % 2) + j // c % w % 2
    opens = [_opening(g, src, 1), _opening(mask, 4 * src + k, 1)]
    descs = [("0x" + g.root.hex(), pooled // c, c), ("0x" + mask.root.hex(), pooled, 4)]
    return harness.functions.unpoolElement(descs, shape, j, opens), sum(len(o[1]) for o in opens)


def tx_gas(w3, fn) -> tuple[int, int]:
    """``(gas, calldata bytes)`` of a transaction calling ``fn``."""
    tx = fn.build_transaction({"from": w3.eth.accounts[0], "gas": 29_000_000})
    gas = w3.eth.estimate_gas({"from": tx["from"], "to": tx["to"], "data": tx["data"]})
    return gas, len(bytes.fromhex(tx["data"][2:]))


def kinds_table() -> list[int]:
    rows = []
    for name, plan, build in (("OneStepOptimHarness", UPDATES, update_call),
                              ("OneStepElementwiseHarness", ELEMENTWISE, elementwise_call),
                              ("OneStepGeluHarness", GELU, gelu_call),
                              ("OneStepLayerNormHarness", LAYERNORM, layernorm_call),
                              ("OneStepExactSumHarness", EXACT_SUMS, exact_sum_call),
                              ("OneStepSoftmaxHarness", SOFTMAX, softmax_call),
                              ("OneStepXentHarness", XENT, xent_call),
                              ("OneStepQuantHarness", QUANT, quant_call),
                              ("OneStepClipHarness", CLIP, clip_call),
                              ("OneStepPoolHarness", POOL, pool_call)):
        with harness_on_devnet(name=name) as harness:
            for model, what, shape, kind, workers in plan:
                fn, nodes = build(harness, kind, shape, workers)
                gas, size = tx_gas(harness.w3, fn)
                whole = build in (exact_sum_call, xent_call, quant_call)
                rows.append((model, what, "x".join(map(str, shape)), "-" if whole else workers or "-",
                             gas, size, nodes))
    head = ("model", "kind", "tensor", "contributions", "tx gas", "calldata B", "proof nodes", "of 10 M")
    print("\n| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for model, what, shape, workers, gas, size, nodes in rows:
        print(f"| {model} | {what} | {shape} | {workers} | {gas:,} | {size:,} | {nodes} | {100 * gas / LIMIT:.1f} % |")
    return [r[4] for r in rows]


def main() -> None:
    rows = []
    with harness_on_devnet(name="OneStepGemmHarness") as harness:
        w3 = harness.w3
        for model, what, m, k, n in PRODUCTS:
            for limbs in ((2, 3) if k == 1024 and "down" in what else (2,)):
                gas, size, nodes = measure(harness, w3, m, k, n, limbs)
                rows.append((model, what, f"{m}x{k}x{n}", k, limbs, gas, size, nodes))
    head = ("model", "product", "M x K x N", "K", "limbs", "tx gas", "gas / K", "calldata B", "proof nodes", "of 10 M")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for model, what, shape, k, limbs, gas, size, nodes in rows:
        print(f"| {model} | {what} | {shape} | {k:,} | {limbs} | {gas:,} | {gas // k:,} | {size:,} | {nodes} | "
              f"{100 * gas / LIMIT:.1f} % |")
    worst = max(max(r[5] for r in rows), *kinds_table())
    print(f"\nlargest transaction: {worst:,} gas ({'within' if worst <= LIMIT else 'OVER'} the 10 M limit)")


if __name__ == "__main__":
    main()
