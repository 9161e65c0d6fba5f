"""Hand-written, bit-reproducible forward and backward passes for the registry's models.

Autograd is not used: every product goes through the integer GEMM engine (``intgemm``:
exact integer sums of quantised operands, rounded once to float32) and every other step is
elementwise or data movement, so the gradient is a pure function of (parameters, batch),
whatever the device, thread count, GEMM route or micro-batch split.

How each layer's products are quantised (``b = 7 * limbs`` bits per operand):

* weights are quantised once per step, twice: per output channel (the forward product)
  and per input feature (the input-gradient product);
* forward ``h = a @ W.T``: rows of ``a`` (one sample, or one conv patch) are quantised
  alone, so a row's output depends only on that row;
* input gradient ``dA = G @ W``: rows of ``G`` likewise;
* weight gradient ``dW = G.T @ a`` sums over the batch rows ``m``. It reuses the forward
  integers ``qa[m] = a[m] / sa[m]`` (and their int8 limbs) and folds the row scale into
  ``G' = G * sa[m]``, whose columns are quantised with the largest magnitude over the
  *whole batch*; the bias gradient sums the columns of ``G`` quantised the same way.
  Integer partial sums add exactly, so micro-batches that share those per-column maxima
  sum to exactly the full batch's integers. That is why a micro-batched step makes two
  passes: the first finds the maxima, the second sums.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import intgemm_fused, native
from .intgemm import (DEFAULT_LIMBS, ExactSum, GemmEngine, Operand, check_contraction, quantize,
                      quantize_scaled_columns)
from .intgemm import operand_bits as limb_bits
from .models import ModelSpec
from .repro_ops import F32, first_max_mask, operand_bits, power_scales

# Masks are float32 0/1 and applied as ``x * mask + 0.0``: exact, and the + 0.0 turns the
# -0.0 a negative x times 0 gives into +0.0 (torch.where with a bool mask computes the same
# values but runs several times slower on a CPU).


def _apply(mask: torch.Tensor, x: torch.Tensor, fuse: bool = False) -> torch.Tensor:
    return intgemm_fused.run("apply_mask", fuse, mask, x)


def _im2col(a: torch.Tensor, k: int, fuse: bool = False) -> torch.Tensor:
    """(B, H, W, C) -> (B*H*W, C*k*k) patches, feature order (c, kh, kw) like Conv2d."""
    if native.small(a, fuse):
        return native.im2col(a, k)
    b, h, w, c = a.shape
    p = k // 2
    ap = F.pad(a, (0, 0, p, p, p, p))
    cols = [ap[:, i:i + h, j:j + w, :] for i in range(k) for j in range(k)]
    return torch.stack(cols, dim=-1).reshape(b * h * w, c * k * k)


def _col2im(d: torch.Tensor, shape: tuple[int, int, int, int], k: int, fuse: bool = False) -> torch.Tensor:
    """Adjoint of :func:`_im2col`: overlapping patch gradients added in a fixed order."""
    if native.small(d, fuse):
        return native.col2im(d, shape, k)
    b, h, w, c = shape
    p = k // 2
    d = d.view(b, h, w, c, k * k)
    out = torch.zeros(b, h + 2 * p, w + 2 * p, c, dtype=d.dtype, device=d.device)
    for i in range(k):
        for j in range(k):
            out[:, i:i + h, j:j + w, :] += d[..., i * k + j]
    return out[:, p:p + h, p:p + w, :]


def _pool(a: torch.Tensor, fuse: bool = False):
    if native.small(a, fuse):
        return native.pool(a)
    b, h, w, c = a.shape
    v = a.view(b, h // 2, 2, w // 2, 2, c).permute(0, 1, 3, 5, 2, 4).reshape(
        b, h // 2, w // 2, c, 4)
    return v.amax(dim=-1), first_max_mask(v, -1).to(F32)


def _unpool(g: torch.Tensor, mask: torch.Tensor, fuse: bool = False) -> torch.Tensor:
    if native.small(mask, fuse):
        return native.unpool(g, mask)
    b, h2, w2, c = g.shape
    gv = _apply(mask, g.unsqueeze(-1))
    return gv.view(b, h2, w2, c, 2, 2).permute(0, 1, 4, 2, 5, 3).reshape(b, 2 * h2, 2 * w2, c)


def _softmax_xent(logits: torch.Tensor, y: torch.Tensor, rows: int, fuse: bool):
    """Softmax cross-entropy: compiled on large logits, one C call on small CPU ones, else
    the eager float64 ops (the same bits every way)."""
    if native.small(logits, fuse):
        return native.softmax_xent(logits, y, rows)
    return intgemm_fused.run("softmax_xent", fuse, logits, y, rows)


def _relu(h: torch.Tensor, fuse: bool = False):
    return intgemm_fused.run("relu", fuse, h)


class _Layer:
    """What the backward pass needs from one affine layer's forward pass."""

    __slots__ = ("name", "qa", "mask", "pool_mask", "shape")

    def __init__(self, name, qa):
        self.name, self.qa = name, qa  # qa: the input's quantised rows (an intgemm.Operand)
        self.mask = self.pool_mask = self.shape = None


class ReproNet:
    """Forward, loss and gradient of one :class:`ModelSpec` in repro arithmetic."""

    def __init__(self, spec: ModelSpec, engine: GemmEngine | None = None,
                 limbs: int = DEFAULT_LIMBS):
        self.spec = spec
        self.engine = engine if engine is not None else GemmEngine(route="float64")
        self.limbs = limbs
        self.layers = [f"conv.{i}" for i in range(len(spec.channels))] + [
            f"fc.{j}" for j in range(len(spec.fc_widths) - 1)]

    # --- forward -----------------------------------------------------------------------

    def quantize_weights(self, params: dict[str, torch.Tensor]) -> dict:
        """Per-step integer copies of every weight matrix ``W`` (out, in), shared by all
        passes: ``W.T`` per output channel (forward) and ``W`` per input feature
        (input gradient), both as right operands."""
        wq = {}
        for name in self.layers:
            w = params[name + ".weight"]
            w = w.reshape(w.shape[0], -1)
            wq[name] = (self._quantize(w.T, 0), self._quantize(w, 0))
        return wq

    def _affine(self, name, a, params, wq, tape):
        qa = self._quantize(a, 1)
        h = self.engine.matmul(qa, wq[name][0], params[name + ".bias"])
        if tape is not None:
            tape.append(_Layer(name, qa))
        return h

    def forward(self, params, x, wq=None, tape=None) -> torch.Tensor:
        """float32 logits (R, classes) of float32 inputs (R, features)."""
        spec = self.spec
        wq = wq if wq is not None else self.quantize_weights(params)
        r = x.shape[0]
        if spec.kind == "cnn":
            a = x.reshape(r, *spec.in_shape).permute(0, 2, 3, 1)  # NHWC
            for i, o in enumerate(spec.channels):
                shape = tuple(a.shape)
                fuse = self.engine.fuse
                h = self._affine(f"conv.{i}", _im2col(a, spec.kernel, fuse), params, wq, tape)
                h, mask = _relu(h, fuse)
                a, pool_mask = _pool(h.view(shape[0], shape[1], shape[2], o), fuse)
                if tape is not None:
                    tape[-1].mask, tape[-1].pool_mask, tape[-1].shape = mask, pool_mask, shape
            a = a.permute(0, 3, 1, 2).reshape(r, -1)  # flatten in (C, H, W) order
        else:
            a = x
        n_fc = len(spec.fc_widths) - 1
        for j in range(n_fc):
            a = self._affine(f"fc.{j}", a, params, wq, tape)
            if j < n_fc - 1:
                a, mask = _relu(a, self.engine.fuse)
                if tape is not None:
                    tape[-1].mask = mask
        return a

    # --- backward ----------------------------------------------------------------------

    def _input_grad(self, g: torch.Tensor, name: str, wq) -> torch.Tensor:
        """float32 ``g @ W`` with rows of ``g`` quantised alone."""
        return self.engine.matmul(self._quantize(g, 1), wq[name][1])

    def _quantize(self, x, dim, amax=None):
        return quantize(x, dim, self.limbs, amax, fuse=self.engine.fuse)

    def _backward(self, tape, g, wq, visit):
        """Walk the tape backwards; ``visit(layer, g)`` gets each layer's output gradient."""
        spec = self.spec
        n_conv = len(spec.channels)
        for idx in range(len(tape) - 1, -1, -1):
            layer = tape[idx]
            visit(layer, g)
            if idx == 0:
                return
            g = self._input_grad(g, layer.name, wq)
            below = tape[idx - 1]
            if idx > n_conv:  # dense below dense: through the ReLU
                g = _apply(below.mask, g, self.engine.fuse)
                continue
            if idx == n_conv:  # first dense layer: undo the (C, H, W) flatten
                _, h, w, _ = below.shape
                g = g.view(-1, spec.channels[-1], h // 2, w // 2).permute(0, 2, 3, 1)
            else:  # conv input gradient: patches back to pixels
                g = _col2im(g, layer.shape, spec.kernel, self.engine.fuse)
            g = _unpool(g, below.pool_mask, self.engine.fuse)
            g = _apply(below.mask, g.reshape(below.mask.shape), self.engine.fuse)

    def gradients(self, params, x, y, micro_batch: int | None = None):
        """Gradient of the mean cross-entropy over the batch ``(x, y)``.

        Returns ``(grads, sumexp, target)`` (the last two give the per-row losses, see
        ``repro_ops.xent_loss``). With ``micro_batch`` the batch is processed in slices of
        that many rows, in two passes, and every bit of the result is the same.
        """
        rows = x.shape[0]
        wq = self.quantize_weights(params)
        size = rows if not micro_batch or micro_batch >= rows else int(micro_batch)
        slices = [(i, min(i + size, rows)) for i in range(0, rows, size)]
        sums = _GradSums(self.spec, rows, self.engine, self.limbs)

        if len(slices) > 1:  # pass 1: the whole batch's per-column maxima
            for lo, hi in slices:
                tape = []
                logits = self.forward(params, x[lo:hi], wq, tape)
                g = _softmax_xent(logits, y[lo:hi], rows, self.engine.fuse)[0]
                self._backward(tape, g, wq, sums.observe)
        visit = sums.both if len(slices) == 1 else sums.add
        sumexps, targets = [], []
        for lo, hi in slices:  # pass 2: exact integer sums
            tape = []
            logits = self.forward(params, x[lo:hi], wq, tape)
            g, sumexp, target = _softmax_xent(logits, y[lo:hi], rows, self.engine.fuse)
            self._backward(tape, g, wq, visit)
            sumexps.append(sumexp)
            targets.append(target)
        return sums.result(params), torch.cat(sumexps), torch.cat(targets)


class _GradSums:
    """Each layer's weight and bias gradient as exact integer sums over the batch rows."""

    def __init__(self, spec: ModelSpec, batch: int, engine: GemmEngine, limbs: int):
        self.rows = {f"conv.{i}": batch * h * w for i, (_, h, w) in enumerate(spec.conv_shapes())}
        self.rows.update({f"fc.{j}": batch for j in range(len(spec.fc_widths) - 1)})
        self.engine, self.limbs = engine, limbs
        for rows in self.rows.values():
            check_contraction(rows, limbs)
        self.max_gp: dict[str, torch.Tensor] = {}  # per column: max |G * sa|
        self.max_g: dict[str, torch.Tensor] = {}  # per column: max |G|
        self.sums: dict[str, list] = {}

    def observe(self, layer, g):
        """Pass 1: fold this slice into the per-column maxima of ``G' = G * sa`` (sa: the
        row scales of the forward integers, powers of two) and of ``G`` (max is order-free)."""
        mgp, mg = intgemm_fused.run("column_maxima", self.engine.fuse, g, layer.qa.scale)
        name = layer.name
        if name in self.max_gp:
            mgp = torch.maximum(self.max_gp[name], mgp)
            mg = torch.maximum(self.max_g[name], mg)
        self.max_gp[name], self.max_g[name] = mgp, mg

    def both(self, layer, g):
        """One-slice batch: maxima and sums in one go (one C call for small CPU tensors)."""
        fuse = self.engine.fuse
        if native.small(g, fuse):
            name = layer.name
            q64, down, sb, down_b = native.grad_columns(g, layer.qa.scale, limb_bits(self.limbs),
                                                        operand_bits(self.rows[name], 0))
            right = Operand(None, down, self.limbs, q64=q64)
            self.sums[name] = [self.engine.matmul(layer.qa.transposed(), right), sb, down, down_b]
            return
        self.observe(layer, g)
        self.add(layer, g, whole=True)

    def add(self, layer, g, whole=False):
        """Pass 2: add this slice's integer products to the layer's sums (exact). The sums
        are taken transposed, ``dW.T = qa.T @ G'`` (same integers): ``G'`` is quantised per
        column as it lies and the int8 kernel reads ``qa``'s limbs transposed in place. A ``whole``
        batch's gradient is rounded at once (the same bits as finishing its sums later)."""
        name, fuse = layer.name, self.engine.fuse
        right = quantize_scaled_columns(g, layer.qa.scale, self.max_gp[name], self.limbs, fuse)  # (rows, out)
        left = layer.qa.transposed()  # (in, rows), unit scale, a view of the limbs
        sw = self.engine.matmul(left, right) if whole else self.engine.exact_sum(left, right)
        up_b, down_b = power_scales(self.max_g[name], operand_bits(self.rows[name], 0))
        sb = intgemm_fused.run("scaled_column_sums", fuse, g, up_b)
        if name in self.sums:
            self.sums[name][0].add(sw)
            self.sums[name][1] += sb
        else:  # +0.0 makes a possible -0.0 sum +0.0
            self.sums[name] = [sw, sb.add_(0.0), right.scale, down_b]

    def result(self, params):
        grads = {}
        for name, (sw, sb, scale_w, scale_b) in self.sums.items():
            shape = params[name + ".weight"].shape
            if isinstance(sw, ExactSum):
                sw = sw.finish(None, scale_w, self.engine.fuse)
            grads[name + ".weight"] = sw.T.contiguous().view(shape)
            grads[name + ".bias"] = sb.mul_(scale_b).to(F32)
        return grads
