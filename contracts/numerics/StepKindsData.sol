// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IOneStepKind, StepEntry} from "../interfaces/IStepGame.sol";
import {Float32} from "./Float32.sol";
import {OneStepElementwise} from "./OneStepElementwise.sol";
import {OneStepExactSum} from "./OneStepExactSum.sol";
import {OneStepGemm} from "./OneStepGemm.sol";
import {OneStepPool} from "./OneStepPool.sol";
import {StepKinds} from "./StepKinds.sol";
import {TensorMerkle} from "./TensorMerkle.sol";

/// @title StepKindsData
/// @notice The step game's one-steps of the data-movement kinds (docs/onestep.md). Inputs
/// and attributes (a list as its length then its items):
///
/// * `embedding`: ids (int32 words), the table (rows, d); output (ids, d). Openings: `ids[r]`,
///   the table's element.
/// * `scatter`: gᵀ (d, n), ids (n); rows (the table's); output (rows, d). Openings: row `j`
///   of gᵀ, every id.
/// * `dropout`: x, the step's dropout key (a batch tensor of 8 int32 words: the 32 bytes);
///   site (its UTF-8 bytes, one a word), p_f64, first. Openings: the element of x, the key.
/// * `pool`: the map a (B, H, W, C); shape (B, H, W, C); outputs the pooled map and the mask
///   (B, H/2, W/2, C, 4). Openings: the window's four elements.
/// * `unpool`: the pooled gradient, the mask; shape (the output's B, H, W, C). Openings: the
///   gradient's element and the mask's.
contract StepKindsData is IOneStepKind {
    using StepKinds for OneStepGemm.Tensor[];
    using StepKinds for OneStepGemm.Opening[];

    bytes32 internal constant EMBEDDING = keccak256("embedding");
    bytes32 internal constant SCATTER = keccak256("scatter");
    bytes32 internal constant DROPOUT = keccak256("dropout");
    bytes32 internal constant POOL = keccak256("pool");
    bytes32 internal constant UNPOOL = keccak256("unpool");

    /// @inheritdoc IOneStepKind
    function element(
        StepEntry.Entry calldata e,
        OneStepGemm.Tensor[] calldata t,
        uint256 index,
        OneStepGemm.Opening[] calldata o
    ) external pure returns (uint256) {
        bytes32 kind = e.kind;
        (uint256 i, uint256 j) = StepKinds.rowCol(e, index);
        if (kind == EMBEDDING) {
            StepKinds.need(t, o, 2);
            return OneStepElementwise.embeddingElement(t[0], t[1], i, j, o.two());
        }
        if (kind == SCATTER) {
            uint256 rows = StepKinds.attrs(e, 1)[0];
            StepKinds.need(t, o, 2);
            return OneStepExactSum.scatterElement(t.two(), rows, i, j, o.two());
        }
        if (kind == DROPOUT) {
            StepKinds.need(t, o, 2);
            return _dropout(StepKinds.attrs(e, 3), t, index, o);
        }
        if (kind == POOL) {
            StepKinds.need(t, o, 1);
            if (o.length < 4) revert StepKinds.StepKindArity(4, t.length, o.length);
            (uint32 out, uint32[4] memory mask) = OneStepPool.poolElement(t[0], _map(e), e.output == 0 ? index : index / 4, o.four());
            return e.output == 0 ? out : mask[index % 4];
        }
        if (kind == UNPOOL) {
            StepKinds.need(t, o, 2);
            return OneStepPool.unpoolElement(t.two(), _map(e), index, o.two());
        }
        revert StepKinds.StepKindUnknown(kind);
    }

    /// @dev `x · mask` at `index`: the site's name from its bytes, the key from its tensor's
    /// first 8 words.
    function _dropout(uint256[] calldata a, OneStepGemm.Tensor[] calldata t, uint256 index, OneStepGemm.Opening[] calldata o)
        private
        pure
        returns (uint32)
    {
        (OneStepElementwise.Mask memory m, uint256 first) = _mask(a, t[1], o[1]);
        return Float32.mul(OneStepGemm.openAt(t[0], index, o[0]), OneStepElementwise.dropoutMask(m, first + index));
    }

    /// @dev The site's mask (attributes site, p, first; the key tensor opened by `o`) and `first`.
    function _mask(uint256[] calldata a, OneStepGemm.Tensor calldata key, OneStepGemm.Opening calldata o)
        private
        pure
        returns (OneStepElementwise.Mask memory, uint256)
    {
        (uint256[] calldata name, uint256 next) = StepKinds.list(a, 0);
        if (a.length < next + 2) revert StepKinds.StepKindAttributes(next + 2, a.length);
        return (OneStepElementwise.maskOf(_key(key, o), _bytes(name), uint64(a[next])), a[next + 1]);
    }

    /// @dev One byte a word, as bytes.
    function _bytes(uint256[] calldata name) private pure returns (bytes memory site) {
        site = new bytes(name.length);
        for (uint256 k = 0; k < name.length; ++k) {
            site[k] = bytes1(uint8(name[k]));
        }
    }

    /// @dev The key tensor's first 8 words (32 bytes), opened by `o`.
    function _key(OneStepGemm.Tensor calldata k, OneStepGemm.Opening calldata o) private pure returns (bytes32 key) {
        uint256 p = TensorMerkle.open(k.root, k.rows * k.cols, 0, 8, o.chunks, o.proof);
        assembly ("memory-safe") {
            key := calldataload(p)
        }
    }

    /// @dev The `shape` attribute (a list of four: B, H, W, C) as the pool library's map.
    function _map(StepEntry.Entry calldata e) private pure returns (OneStepPool.Map calldata s) {
        (uint256[] calldata dims,) = StepKinds.list(StepKinds.attrs(e, 5), 0);
        if (dims.length != 4) revert StepKinds.StepKindAttributes(5, e.attributes.length);
        assembly ("memory-safe") {
            s := dims.offset
        }
    }
}
