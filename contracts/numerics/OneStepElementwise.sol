// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Float32} from "./Float32.sol";
import {Float64} from "./Float64.sol";
import {OneStepGemm} from "./OneStepGemm.sol";
import {TensorMerkle} from "./TensorMerkle.sol";

/// @title OneStepElementwise
/// @notice The one-step verifier of repro mode's elementwise and data-movement operators:
/// one output element from the input elements it reads, each opened against its root, with
/// the engine's bits (the reference is truetrain/numerics/elementwise.py):
/// ReLU `(h · mask + 0, mask)` with `mask = h > 0 ? 1 : 0` and its backward `g · mask + 0`
/// (truetrain/training/intgemm_fused.py); `a + b` with `b` repeated over `a` (a bias row,
/// position embeddings, a residual); `permute` (a transpose, attention's head split); the
/// embedding's gather `table[ids[r]][c]`; dropout's counter-based mask and `x · mask`
/// (truetrain/training/ops/dropout.py).
library OneStepElementwise {
    using OneStepGemm for OneStepGemm.Tensor;

    uint32 internal constant ONE = 0x3F800000;
    uint64 internal constant ONE64 = 0x3FF0000000000000;
    uint64 internal constant TWO_POW_32 = 0x41F0000000000000;
    uint256 internal constant M32 = 0xFFFFFFFF;

    /// @notice `perm` is not a permutation of `shape`'s dimensions, or `shape` does not hold
    /// the tensor's elements.
    error OneStepPermutationInvalid(uint256 dims, uint256 numel);
    /// @notice An embedding index outside its table.
    error OneStepIndexOutOfRange(uint256 id, uint256 rows);

    /// @notice Dropout's attributes: the step's dropout `key`, the `site` name, the keep rate
    /// complement `p` (float64 bits, the manifest's), the batch position `first` of the
    /// tensor's element 0 (a micro-batch's offset times its elements a sample).
    struct Dropout {
        bytes32 key;
        bytes site;
        uint64 p;
        uint256 first;
    }

    /// @notice What a dropout site's elements share: the key words, the keep threshold, the
    /// kept elements' scale.
    struct Mask {
        uint256 k0;
        uint256 k1;
        uint256 k2;
        int256 threshold;
        uint32 scale;
    }

    // --- the arithmetic -------------------------------------------------------------------

    /// @notice `(relu(h), mask)`: `mask` is 1.0 where `h > 0` (NaN is not), else +0; the ReLU
    /// is `h · mask + 0` (so +0 for -0 and negatives, NaN for -inf).
    function relu(uint32 h) internal pure returns (uint32 y, uint32 mask) {
        mask = h > 0 && h <= 0x7F800000 ? ONE : 0;
        y = applyMask(h, mask);
    }

    /// @notice `x · mask + 0` (the ReLU's backward).
    function applyMask(uint32 x, uint32 mask) internal pure returns (uint32) {
        return Float32.add(Float32.mul(x, mask), 0);
    }

    /// @notice The flat input index of flat output element `index` of `x.permute(perm)` for
    /// `x` of `shape` (row-major).
    function permuteSource(uint256[] calldata shape, uint256[] calldata perm, uint256 index)
        internal
        pure
        returns (uint256 flat)
    {
        uint256 n = shape.length;
        if (perm.length != n) revert OneStepPermutationInvalid(n, 0);
        if (index >= _product(shape)) revert TensorMerkle.TensorRangeOutOfBounds(index, 1, _product(shape));
        uint256 seen;
        uint256[] memory source = new uint256[](n);
        for (uint256 k = n; k > 0; --k) {
            uint256 d = perm[k - 1];
            if (d >= n || seen >> d & 1 == 1) revert OneStepPermutationInvalid(n, 0);
            seen |= 1 << d;
            source[d] = index % shape[d];
            index /= shape[d];
        }
        for (uint256 k = 0; k < n; ++k) {
            flat = flat * shape[k] + source[k];
        }
    }

    /// @notice The flat index of `table[id][c]` in a table (rows, cols).
    function embeddingSource(uint256 id, uint256 rows, uint256 cols, uint256 c) internal pure returns (uint256) {
        if (c >= cols) revert OneStepGemm.OneStepOperandsMismatch(1);
        if (id >= rows) revert OneStepIndexOutOfRange(id, rows);
        return id * cols + c;
    }

    /// @notice A dropout site's key words (big-endian words 0..2 of keccak256(key ‖ site)),
    /// threshold `min(round(p · 2^32), 2^32)` and scale `float32(1) / float32(1 - p)`.
    function prepare(Dropout calldata d) internal pure returns (Mask memory) {
        return maskOf(d.key, d.site, d.p);
    }

    /// @notice `prepare` of the step's dropout `key`, the `site` name and `p` (float64 bits).
    function maskOf(bytes32 key, bytes memory site, uint64 p) internal pure returns (Mask memory m) {
        uint256 h = uint256(keccak256(abi.encodePacked(key, site)));
        m.k0 = h >> 224;
        m.k1 = h >> 192 & M32;
        m.k2 = h >> 160 & M32;
        m.threshold = Float64.toInt64(Float64.round(Float64.mul(p, TWO_POW_32)));
        if (m.threshold > 1 << 32) m.threshold = 1 << 32;
        m.scale = Float32.div(ONE, Float64.toFloat32(Float64.sub(ONE64, p)));
    }

    /// @notice The mask at batch counter `counter`: `scale` if kept, else `0 · scale`.
    function dropoutMask(Mask memory m, uint256 counter) internal pure returns (uint32) {
        uint256 h = _mix(counter & M32 ^ m.k0);
        h = _mix(h ^ (counter >> 32 & M32) ^ m.k1);
        h = _mix(h ^ m.k2);
        return Float32.mul(int256(h) >= m.threshold ? ONE : 0, m.scale);
    }

    /// @dev lowbias32: xor-shift, multiply, xor-shift, multiply, xor-shift (mod 2^32).
    function _mix(uint256 x) private pure returns (uint256) {
        unchecked {
            x ^= x >> 16;
            x = x * 0x7FEB352D & M32;
            x ^= x >> 15;
            x = x * 0x846CA68B & M32;
            return x ^ x >> 16;
        }
    }

    // --- the one-steps: inputs opened against their roots ---------------------------------

    function _product(uint256[] calldata shape) private pure returns (uint256 n) {
        n = 1;
        for (uint256 k = 0; k < shape.length; ++k) {
            n *= shape[k];
        }
    }

    function _numel(OneStepGemm.Tensor calldata t) private pure returns (uint256) {
        return t.rows * t.cols;
    }

    /// @notice `(relu(h), mask)` at `index`.
    function reluElement(OneStepGemm.Tensor calldata h, uint256 index, OneStepGemm.Opening calldata o)
        internal
        pure
        returns (uint32, uint32)
    {
        return relu(h.openAt(index, o));
    }

    /// @notice `g · mask + 0` at `index` (`g` and `mask` of one shape).
    function applyMaskElement(OneStepGemm.Tensor[2] calldata t, uint256 index, OneStepGemm.Opening[2] calldata o)
        internal
        pure
        returns (uint32)
    {
        (uint32 g, uint32 mask) = OneStepGemm.openPair(t, index, o);
        return applyMask(g, mask);
    }

    /// @notice `a[index] + b[index % numel(b)]` (`t` = a, b).
    function addElement(OneStepGemm.Tensor[2] calldata t, uint256 index, OneStepGemm.Opening[2] calldata o)
        internal
        pure
        returns (uint32)
    {
        uint256 nb = _numel(t[1]);
        if (nb == 0 || _numel(t[0]) % nb != 0) revert OneStepGemm.OneStepOperandsMismatch(1);
        return Float32.add(t[0].openAt(index, o[0]), t[1].openAt(index % nb, o[1]));
    }

    /// @notice Element `index` of `x.permute(perm)` for `x` of `shape`.
    function permuteElement(
        OneStepGemm.Tensor calldata x,
        uint256[] calldata shape,
        uint256[] calldata perm,
        uint256 index,
        OneStepGemm.Opening calldata o
    ) internal pure returns (uint32) {
        if (_product(shape) != _numel(x)) revert OneStepPermutationInvalid(shape.length, _numel(x));
        return x.openAt(permuteSource(shape, perm, index), o);
    }

    /// @notice `table[ids[r]][c]`: `ids` an index tensor (its int32 values as 4-byte words),
    /// `table` (rows, cols); `o` opens `ids[r]`, then the table's element.
    function embeddingElement(
        OneStepGemm.Tensor calldata ids,
        OneStepGemm.Tensor calldata table,
        uint256 r,
        uint256 c,
        OneStepGemm.Opening[2] calldata o
    ) internal pure returns (uint32) {
        return table.openAt(embeddingSource(ids.openAt(r, o[0]), table.rows, table.cols, c), o[1]);
    }

    /// @notice `x · mask` at `index` (batch counter `d.first + index`).
    function dropoutElement(
        Dropout calldata d,
        OneStepGemm.Tensor calldata x,
        uint256 index,
        OneStepGemm.Opening calldata o
    ) internal pure returns (uint32) {
        return Float32.mul(x.openAt(index, o), dropoutMask(prepare(d), d.first + index));
    }
}
