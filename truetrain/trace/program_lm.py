"""The program of a byte-level transformer LM's step (truetrain/training/lm.py): the
embeddings, pre-LayerNorm blocks (causal attention, GELU MLP), the tied head, the
cross-entropy, the backward in autograd's order, the update (docs/onestep.md).

Every activation is 2-D (tokens ``R = B·T`` rows) except the attention's: the heads
``(3, B·H, T, dh)`` (q, k, v; the qkv output permuted), their transposes
``(3, B·H, dh, T)``, the scores and probabilities ``(B·H, T, T)`` (the softmax kinds read
them as rows ``(B·H·T, T)``). A ``bmm`` is ``A · Btᵀ`` with both operands contracted over
their last dimension, as ``linear``: so ``Q·Kᵀ`` reads the heads twice, ``P·V`` reads
``Vᵀ`` from the transposed heads, and the backward's products read transposes of P, the
output gradient and the scores' gradient."""

from __future__ import annotations

from ..training.lm import LN_EPS
from ..training.ops.attention import _scale
from ..training.manifest import Manifest
from ..training.models import param_shapes
from .program import BATCH, Builder, Program, Ref, optimizer_batch, state_names
from .program_optim import update


class _LM:
    def __init__(self, manifest: Manifest):
        spec = manifest.model
        self.spec, self.limbs = spec, manifest.limbs
        self.B, self.T = manifest.batch_size, spec.seq_len
        self.R, self.H, self.dh = self.B * self.T, spec.n_heads, spec.head_dim
        self.N = self.B * self.H
        # the shard's ids and targets, then what the program derives (program.derived_batch)
        names, shapes = ["inputs", "targets", "positions"], [(self.B, self.T)] * 3
        if spec.dropout:
            names, shapes = names + ["dropout_key"], shapes + [(8,)]
        rate, rate_shape = optimizer_batch(manifest)
        names, shapes = names + rate, shapes + rate_shape
        self.b = Builder(*state_names(manifest), names, shapes)
        self.grads: dict[str, Ref] = {}

    def w(self, name: str) -> Ref:
        return self.b.state_ref("model." + name)

    # -- pieces -----------------------------------------------------------------------

    def drop(self, x: Ref, site: str, label: str) -> Ref:
        if not self.spec.dropout:
            return x
        key = Ref(BATCH, self.b.batch.index("dropout_key"))
        return self.b.add("dropout", [x, key], self.b.shape(x), label, site=site, p_f64=float(self.spec.dropout),
                          first=0)

    def layernorm(self, x: Ref, name: str) -> Ref:
        return self.b.add("layernorm", [x, self.w(name + ".weight"), self.w(name + ".bias")], self.b.shape(x),
                          f"{name} forward", eps_f64=LN_EPS)

    def layernorm_back(self, x: Ref, g: Ref, name: str) -> Ref:
        b = self.b
        dx, gx = b.outputs("layernorm_backward", [x, g, self.w(name + ".weight")], [b.shape(x)] * 2,
                           f"{name} backward", eps_f64=LN_EPS)
        d = b.shape(x)[1]
        self.grads[name + ".bias"] = b.add("column_sum", [b.transpose(g, f"{name} output gradient transposed")],
                                           (d,), f"{name}.bias gradient")
        self.grads[name + ".weight"] = b.add("column_sum", [b.transpose(gx, f"{name} g·xhat transposed")], (d,),
                                             f"{name}.weight gradient")
        return dx

    def linear(self, x: Ref, name: str) -> Ref:
        return self.b.linear(x, self.w(name + ".weight"), self.w(name + ".bias"), self.limbs, f"{name} forward")

    def linear_back(self, g: Ref, a: Ref, name: str, wname: str | None = None, bias: bool = True) -> Ref:
        """The parameter gradients (into ``grads``) and the input gradient ``g · W``."""
        b, wname = self.b, wname or name + ".weight"
        for k, ref in b.param_grads(g, a, "model." + wname, "model." + name + ".bias" if bias else None,
                                    self.limbs, name).items():
            self.grads[k.removeprefix("model.")] = ref
        wt = b.transpose(self.w(wname), f"{wname} transposed")
        return b.linear(g, wt, None, self.limbs, f"{name} input gradient")

    def bmm(self, a: Ref, bt: Ref, shape, label: str, scale: float = 1.0, parts=(0, 0)) -> Ref:
        return self.b.add("bmm", [a, bt], shape, label, limbs=self.limbs, scale=scale, a_part=parts[0],
                          b_part=parts[1])

    def permute(self, x: Ref, shape, perm, label: str) -> Ref:
        out = tuple(shape[p] for p in perm)
        return self.b.add("permute", [x], out, label, shape=tuple(shape), perm=tuple(perm))

    def swap(self, x: Ref, label: str) -> Ref:
        """The last two dimensions of a (N, M, K) tensor swapped."""
        n, m, k = self.b.shape(x)
        return self.permute(x, (n, m, k), (0, 2, 1), label)

    # -- the model --------------------------------------------------------------------

    def block_forward(self, i: int, x: Ref) -> tuple[Ref, dict]:
        b, B, T, H, dh, N = self.b, self.B, self.T, self.H, self.dh, self.N
        p = f"blocks.{i}."
        s: dict[str, Ref] = {"x": x}
        s["a1"] = self.layernorm(x, p + "ln1")
        qkv = self.linear(s["a1"], p + "attn.qkv")
        split = (B, T, 3, H, dh)
        s["heads"] = b.add("permute", [qkv], (3, N, T, dh), p + "heads", shape=split, perm=(2, 0, 3, 1, 4))
        s["heads_t"] = b.add("permute", [qkv], (3, N, dh, T), p + "heads transposed", shape=split,
                             perm=(2, 0, 3, 4, 1))
        scores = self.bmm(s["heads"], s["heads"], (N, T, T), p + "scores", _scale(dh), (0, 1))
        sums = b.add("softmax_row_sum", [scores], (N * T, 1), p + "softmax row sums")  # a column: (N·T, 2) words
        s["p"] = b.add("softmax", [scores, sums], (N, T, T), p + "softmax")
        o = self.bmm(s["p"], s["heads_t"], (N, T, dh), p + "attention output", parts=(0, 2))
        s["merged"] = b.add("permute", [o], (self.R, self.spec.d_model), p + "heads merged", shape=(B, H, T, dh),
                            perm=(0, 2, 1, 3))
        y = self.drop(self.linear(s["merged"], p + "attn.proj"), p + "attn", p + "attn dropout")
        s["x2"] = b.add("add", [x, y], b.shape(x), p + "attention residual")
        s["a2"] = self.layernorm(s["x2"], p + "ln2")
        s["h"] = self.linear(s["a2"], p + "mlp.fc")
        s["hg"] = b.add("gelu", [s["h"]], b.shape(s["h"]), p + "gelu")
        z = self.drop(self.linear(s["hg"], p + "mlp.proj"), p + "mlp", p + "mlp dropout")
        return b.add("add", [s["x2"], z], b.shape(x), p + "mlp residual"), s

    def block_backward(self, i: int, g: Ref, s: dict) -> Ref:
        b, B, T, H, dh, N = self.b, self.B, self.T, self.H, self.dh, self.N
        p = f"blocks.{i}."
        gz = self.drop(g, p + "mlp", p + "mlp dropout backward")
        dhg = self.linear_back(gz, s["hg"], p + "mlp.proj")
        dh_ = b.add("gelu_backward", [s["h"], dhg], b.shape(dhg), p + "gelu backward")
        da2 = self.linear_back(dh_, s["a2"], p + "mlp.fc")
        g2 = b.add("add", [g, self.layernorm_back(s["x2"], da2, p + "ln2")], b.shape(g), p + "ln2 gradient sum")
        gy = self.drop(g2, p + "attn", p + "attn dropout backward")
        dmerged = self.linear_back(gy, s["merged"], p + "attn.proj")
        do = b.add("permute", [dmerged], (N, T, dh), p + "output gradient by head", shape=(B, T, H, dh),
                   perm=(0, 2, 1, 3))
        dv = self.bmm(self.swap(s["p"], p + "softmax transposed"), self.swap(do, p + "output gradient transposed"),
                      (N, T, dh), p + "dv")
        dp = self.bmm(do, s["heads"], (N, T, T), p + "dp", parts=(0, 2))
        ds = b.add("softmax_backward", [s["p"], dp], (N, T, T), p + "softmax backward", scale=_scale(dh))
        dq = self.bmm(ds, s["heads_t"], (N, T, dh), p + "dq", parts=(0, 1))
        dk = self.bmm(self.swap(ds, p + "scores gradient transposed"), s["heads_t"], (N, T, dh), p + "dk",
                      parts=(0, 0))
        dqkv = b.add("permute", [dq, dk, dv], (self.R, 3 * self.spec.d_model), p + "qkv gradient",
                     shape=(3, B, H, T, dh), perm=(1, 3, 0, 2, 4))  # the three one after another
        da1 = self.linear_back(dqkv, s["a1"], p + "attn.qkv")
        return b.add("add", [g2, self.layernorm_back(s["x"], da1, p + "ln1")], b.shape(g), p + "ln1 gradient sum")

    def build(self, manifest: Manifest, lr_step: int) -> Program:
        b, spec = self.b, self.spec
        ids, targets = Ref(BATCH, 0), Ref(BATCH, 1)
        tok = b.add("embedding", [ids, self.w("tok_emb")], (self.R, spec.d_model), "token embeddings")
        x = self.drop(b.add("add", [tok, self.w("pos_emb")], (self.R, spec.d_model), "embedding sum"), "emb",
                      "embedding dropout")
        saved = []
        for i in range(spec.n_layers):
            x, s = self.block_forward(i, x)
            saved.append(s)
        xf = self.layernorm(x, "ln_f")
        logits = b.linear(xf, self.w("tok_emb"), None, self.limbs, "head forward")
        g = b.cross_entropy(logits, targets, self.R, "loss")
        head = self.linear_back(g, xf, "head", "tok_emb", bias=False)
        head_grad = self.grads.pop("tok_emb")
        g = self.layernorm_back(x, head, "ln_f")
        for i in reversed(range(spec.n_layers)):
            g = self.block_backward(i, g, saved[i])
        g = self.drop(g, "emb", "embedding dropout backward")
        gt = b.transpose(g, "embedding gradient transposed")
        scatter = b.add("scatter", [gt, ids], (spec.vocab, spec.d_model), "tok_emb gradient (embedding)",
                        rows=spec.vocab)
        self.grads["tok_emb"] = b.add("add", [head_grad, scatter], (spec.vocab, spec.d_model), "tok_emb gradient")
        positions = Ref(BATCH, b.batch.index("positions"))
        self.grads["pos_emb"] = b.add("scatter", [gt, positions], (self.T, spec.d_model), "pos_emb gradient",
                                      rows=self.T)
        update(b, manifest, self.grads, list(param_shapes(spec)), lr_step)
        return b.program()


def lm_program(manifest: Manifest, lr_step: int = 0) -> Program:
    """The LM step's program (docs/onestep.md, "The program and the trace builder")."""
    return _LM(manifest).build(manifest, lr_step)
