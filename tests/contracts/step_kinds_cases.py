"""Real engine tensors (seeded) for each kind of StepKindsQuant, Norm, Optim and Data, and the
numerics reference's bits of the same output: one :class:`KindCase` a kind (and one for a
second output of layernorm_backward, pool, adam and diloco). ``scale`` grows the shapes
toward a model's (the bench)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from tests.contracts.optim_cases import adam_case, aggregate_case
from truetrain.numerics import clip, elementwise, exact_sum, layernorm, pool, quant, special
from truetrain.numerics.ieee import bits32, bits64
from truetrain.numerics.optim_element import adam_element, adam_powers, aggregate_element
from truetrain.trace.builder import committed
from truetrain.training.gemm_check import engine_for
from truetrain.training.intgemm import quantize
from truetrain.training.ops import conv
from truetrain.training.ops.attention import bmm_exact
from truetrain.training.ops.book import GradBook
from truetrain.training.ops.dropout import dropout
from truetrain.training.ops.elementwise import gelu_backward, gelu_forward, ln_backward, ln_forward
from truetrain.training.schedule import clip_factor as engine_clip

F32 = torch.float32


@dataclass
class KindCase:
    name: str
    kind: str
    inputs: list
    out: torch.Tensor
    attrs: dict
    reference: np.ndarray  # the reference's bits of the whole output, flattened
    output: int = 0
    label: str = ""
    extra: dict = field(default_factory=dict)


def _b(t: torch.Tensor) -> np.ndarray:
    t = committed(t).contiguous()
    return np.atleast_1d(bits64(t.numpy()) if t.dtype == torch.float64 else bits32(t.numpy())).reshape(-1)


def _t(bits) -> torch.Tensor:
    return torch.from_numpy(np.asarray(bits, np.uint32).view(np.float32).copy())


def _f32(v) -> int:
    return int(np.float32(v).view(np.uint32))


def _seek(make, want, seed):
    """The first case of ``make(rng)`` from ``seed`` on that ``want`` accepts."""
    for s in range(seed, seed + 400):
        c = make(np.random.default_rng(s))
        if want(c):
            return c
    raise AssertionError("no case found")


def quant_cases(rng, m: int, nin: int, nout: int, limbs: int = 2) -> list[KindCase]:
    a = torch.relu(torch.from_numpy(rng.standard_normal((m, nin)).astype(np.float32)))
    g = torch.from_numpy((rng.standard_normal((m, nout)) * 2.0**-6).astype(np.float32))
    qa = quantize(a, 1, limbs)  # the engine: a's rows as the forward quantised them, the step's book
    scales = qa.scale.reshape(-1)
    book = GradBook(engine_for("cpu"), limbs, m)
    book.weight("w", g, qa)
    dw = book.result()["w"]
    ref_s = quant.row_scales(_b(a).reshape(m, nin), limbs)
    ref_w = quant.weight_grads(_b(a).reshape(m, nin).T, _b(g).reshape(m, nout).T, ref_s, limbs).reshape(-1)
    return [KindCase("row_scales", "row_scales", [a], scales, {"limbs": limbs}, ref_s),
            KindCase("weight_grad", "weight_grad", [g, a, scales], dw, {"limbs": limbs}, ref_w),
            KindCase("weight_grad_transposed", "weight_grad_transposed",
                     [g.T.contiguous(), a.T.contiguous(), scales], dw, {"limbs": limbs}, ref_w)]


def bmm_case(rng, n: int, m: int, k: int, p: int, limbs: int = 2) -> KindCase:
    a = torch.from_numpy(rng.standard_normal((n, m, k)).astype(np.float32))
    b = torch.from_numpy(rng.standard_normal((n, k, p)).astype(np.float32))
    scale = np.float32(1 / np.sqrt(48))
    out = bmm_exact(a, b, limbs) * torch.tensor(scale)
    bt = b.transpose(1, 2).contiguous()
    ra = np.repeat(_b(a).reshape(n, m, 1, k), p, axis=2).reshape(-1, k)
    rb = np.repeat(_b(bt).reshape(n, 1, p, k), m, axis=1).reshape(-1, k)
    return KindCase("bmm", "bmm", [a, bt], out, {"limbs": limbs, "scale": _f32(scale), "a_part": 0, "b_part": 0},
                    quant.bmm_elements(ra, rb, limbs, _f32(scale)))


def norm_cases(rng, rows: int, n: int) -> list[KindCase]:
    x = torch.from_numpy((rng.standard_normal((rows, n)) * 2).astype(np.float32))
    g = torch.from_numpy(rng.standard_normal((rows, n)).astype(np.float32))
    w = torch.from_numpy((1 + 0.1 * rng.standard_normal(n)).astype(np.float32))
    bias = torch.from_numpy((0.1 * rng.standard_normal(n)).astype(np.float32))
    eps = 1e-5
    e64 = int(np.float64(eps).view(np.uint64))
    y, xhat, rstd = ln_forward(x, w, bias, eps)
    dx, gx = ln_backward(g, xhat, rstd, w)
    rdx, rgx = layernorm.ln_backward(_b(x).reshape(rows, n), _b(g).reshape(rows, n), _b(w), e64)
    return [KindCase("gelu", "gelu", [x], gelu_forward(x), {}, special.gelu(_b(x))),
            KindCase("gelu_backward", "gelu_backward", [x, g], gelu_backward(x, g), {}, special.gelu_backward(_b(x), _b(g))),
            KindCase("layernorm", "layernorm", [x, w, bias], y, {"eps_f64": e64},
                     layernorm.ln_forward(_b(x).reshape(rows, n), _b(w), _b(bias), e64).reshape(-1)),
            KindCase("layernorm_backward dx", "layernorm_backward", [x, g, w], dx, {"eps_f64": e64},
                     np.asarray(rdx).reshape(-1)),
            KindCase("layernorm_backward g*xhat", "layernorm_backward", [x, g, w], gx, {"eps_f64": e64},
                     np.asarray(rgx).reshape(-1), output=1)]


def adam_cases(n: int, seed: int) -> list[KindCase]:
    c = _seek(lambda rng: adam_case(rng, n), lambda c: c.attrs.clipped, seed)
    a = c.attrs
    # the rate is an input (the step's batch tensor), the attribute 0 (docs/onestep.md)
    attrs = {"lr": 0, "weight_decay": a.weight_decay, "beta1": a.beta1, "beta2": a.beta2, "eps": a.eps,
             "decoupled": int(a.decoupled), "clipped": int(a.clipped)}
    ins = [_t(c.inputs[k]) for k in ("p", "g", "m", "v")] + [_t(c.scalars[k]).reshape(()) for k in ("b1p", "b2p", "clip")]
    ins.append(_t(a.lr).reshape(()))
    ref = [adam_element(a, *(int(c.inputs[k][i]) for k in ("p", "g", "m", "v")), c.scalars["b1p"], c.scalars["b2p"],
                        c.scalars["clip"]) for i in range(n)]
    powers = adam_powers(a, c.scalars["b1p"], c.scalars["b2p"])
    return [KindCase("adam p", "adam", ins, _t(c.outputs["p"]), attrs, np.array([r[0] for r in ref], np.uint32)),
            KindCase("adam v", "adam", ins, _t(c.outputs["v"]), attrs, np.array([r[2] for r in ref], np.uint32), output=2),
            KindCase("adam_powers", "adam_powers", ins[4:6], _t(c.outputs["powers"][:1]).reshape(()),
                     {"beta1": a.beta1, "beta2": a.beta2}, np.array(powers[:1], np.uint32))]


def aggregate_cases(seed: int) -> list[KindCase]:
    out = []
    for outer in (False, True):
        c = _seek(lambda rng: aggregate_case(rng, 15, 4),
                  lambda c: c.attrs.outer == outer and len(c.weights) >= 2 and (not outer or c.inputs["momentum"].any()),
                  seed)
        xs = [_t(c.inputs[f"x{i}"]) for i in range(len(c.weights))]
        n = len(c.inputs["theta"])
        ref = [aggregate_element(c.attrs, [int(c.inputs[f"x{i}"][e]) for i in range(len(xs))], c.weights,
                                 int(c.inputs["theta"][e]), int(c.inputs["momentum"][e])) for e in range(n)]
        if outer:
            a = c.attrs
            attrs = {"lr": a.lr, "momentum": a.momentum, "nesterov": int(a.nesterov), "weights": c.weights}
            ins = [_t(c.inputs["theta"]), _t(c.inputs["momentum"])] + xs
            out += [KindCase("diloco model", "diloco", ins, _t(c.outputs["model"]), attrs,
                             np.array([r[0] for r in ref], np.uint32)),
                    KindCase("diloco momentum", "diloco", ins, _t(c.outputs["momentum"]), attrs,
                             np.array([r[1] for r in ref], np.uint32), output=1)]
        else:
            out.append(KindCase("fedavg", "fedavg", xs, _t(c.outputs["model"]), {"weights": c.weights},
                                np.array([r[0] for r in ref], np.uint32)))
    return out


def clip_cases(rng, sizes: list[int], width: int) -> list[KindCase]:
    grads = [torch.from_numpy((rng.standard_normal(s) * 2.0**-4).astype(np.float32)) for s in sizes]
    clip_norm = 0.05
    norm, factor, maxima, sums = clip.clip_factor([_b(g) for g in grads], int(np.float64(clip_norm).view(np.uint64)),
                                                  width)
    assert bits32(engine_clip(grads, clip_norm).numpy()) == factor  # the engine's factor is the reference's
    mx = _t(maxima)
    sm = torch.from_numpy(np.asarray(sums, np.uint64).view(np.float64).copy())
    count = sum(sizes)
    fac = _t([factor]).reshape(())
    return [KindCase("clip_max", "clip_max", grads, mx, {"width": width}, np.asarray(maxima, np.uint32)),
            KindCase("clip_sum", "clip_sum", grads + [mx], sm, {"width": width, "count": count},
                     np.asarray(sums, np.uint64)),
            KindCase("clip_factor", "clip_factor", [mx, sm], fac,
                     {"count": count, "clip_norm_f64": int(np.float64(clip_norm).view(np.uint64))},
                     np.array([factor], np.uint32))]


def data_cases(rng, n: int, d: int, rows: int, shape=(2, 4, 4, 3), limbs: int = 2) -> list[KindCase]:
    ids = torch.from_numpy(rng.integers(0, rows, n))
    table = torch.from_numpy(rng.standard_normal((rows, d)).astype(np.float32))
    g = torch.from_numpy(rng.standard_normal((n, d)).astype(np.float32))
    book = GradBook(engine_for("cpu"), limbs, n)
    book.scatter("t", g, ids, rows)
    grad = book.result()["t"]
    key, site, p = bytes(range(32)), "blocks.0.mlp", 0.25
    words = np.frombuffer(key, ">u4").astype(np.uint32)
    x = torch.from_numpy(rng.standard_normal((n, d)).astype(np.float32))
    y = dropout(x, p, key, site, 0)
    m = torch.relu(torch.from_numpy(rng.standard_normal(shape).astype(np.float32)))
    pooled, mask = conv.pool(m)
    gp = torch.from_numpy(rng.standard_normal(tuple(pooled.shape)).astype(np.float32))
    back = conv.unpool(gp, mask)
    rp, rm = pool.pool(_b(m), shape)
    site_bytes = tuple(site.encode())
    return [KindCase("embedding", "embedding", [ids.to(torch.int32), table], table[ids], {},
                     _b(table).reshape(rows, d)[ids.numpy()].reshape(-1)),
            KindCase("scatter", "scatter", [g.T.contiguous(), ids.to(torch.int32)], grad, {"rows": rows},
                     exact_sum.scatter_sums(_b(g).reshape(n, d).T, ids.numpy(), rows).reshape(-1)),
            KindCase("dropout", "dropout", [x, torch.from_numpy(words.view(np.int32).copy())], y,
                     {"site": site_bytes, "p_f64": int(np.float64(p).view(np.uint64)), "first": 0},
                     elementwise.dropout(_b(x), elementwise.dropout_words(key, site), 0, p)),
            KindCase("pool out", "pool", [m], pooled, {"shape": shape}, np.asarray(rp).reshape(-1)),
            KindCase("pool mask", "pool", [m], mask, {"shape": shape}, np.asarray(rm).reshape(-1), output=1),
            KindCase("unpool", "unpool", [gp, mask], back, {"shape": shape},
                     pool.unpool(_b(gp), _b(mask), shape).reshape(-1))]


def increment_case() -> KindCase:
    """AdamW's ``lr_step`` plus one: an int64, two words high first as in a checkpoint (above
    2^32, so both words count)."""
    return KindCase("increment", "increment", [torch.tensor(2**32 + 41)], torch.tensor(2**32 + 42), {},
                    np.array([2**32 + 42], np.uint64))


def all_cases(seed: int = 28) -> list[KindCase]:
    rng = np.random.default_rng(seed)
    return (quant_cases(rng, 16, 8, 4) + [bmm_case(rng, 2, 4, 16, 4)] + norm_cases(rng, 4, 16)
            + adam_cases(32, seed) + aggregate_cases(seed) + clip_cases(rng, [40, 24, 64], 16)
            + data_cases(rng, 12, 4, 10) + [increment_case()])


def _labelled(model: str, cases: list[KindCase], labels: dict[str, str]) -> list[tuple[str, KindCase]]:
    out = []
    for c in cases:
        if c.name in labels:
            c.label = labels[c.name]
            out.append((model, c))
    return out


def bench_cases(seed: int = 28) -> list[tuple[str, KindCase]]:
    """(model, case) at the models' shapes: the digits MLP (batch 32, 64-128-10), the default
    LM (d 256, 1,024 tokens, T 128, FFN 1,024, 8 x 4 heads of 64), the digits CNN's pooling."""
    rng = np.random.default_rng(seed)
    return (_labelled("MLP", quant_cases(rng, 32, 64, 128),
                      {"row_scales": "row scale (a row of 64)", "weight_grad": "weight gradient fc.0 (g, a whole; M 32)"})
            + _labelled("LM", quant_cases(rng, 1024, 256, 1024),
                        {"row_scales": "row scale (a row of d = 256)",
                         "weight_grad_transposed": "weight gradient FFN up (g.T, a.T rows; M 1,024)"})
            + _labelled("LM", [bmm_case(rng, 32, 128, 64, 128)], {"bmm": "attention scores (q @ k.T * scale, K 64)"})
            + _labelled("LM", norm_cases(rng, 1024, 256),
                        {"gelu": "GELU", "gelu_backward": "GELU backward", "layernorm": "LayerNorm (a row of 256)",
                         "layernorm_backward dx": "LayerNorm backward dx",
                         "layernorm_backward g*xhat": "LayerNorm backward g * xhat"})
            + _labelled("LM", adam_cases(4096, seed), {"adam p": "AdamW clipped p", "adam v": "AdamW clipped v",
                                                        "adam_powers": "Adam beta powers"})
            + _labelled("-", aggregate_cases(seed), {"fedavg": "FedAvg mean", "diloco model": "DiLoCo model",
                                                       "diloco momentum": "DiLoCo momentum"})
            + _labelled("LM", clip_cases(rng, [262144, 65536, 256], 16384),
                        {"clip_max": "clip: a range's maximum (16,384 values)",
                         "clip_sum": "clip: a range's sum of squares (16,384 values)",
                         "clip_factor": "clip: the factor (every range's maximum and sum)"})
            + _labelled("LM", data_cases(rng, 1024, 256, 256),
                        {"embedding": "embedding gather (1,024 ids)", "scatter": "embedding scatter (1,024 rows)",
                         "dropout": "dropout"})
            + _labelled("CNN", data_cases(rng, 4, 4, 4, shape=(32, 28, 28, 8)),
                        {"pool out": "2x2 max pool", "pool mask": "2x2 max pool mask", "unpool": "max pool backward"}))
