// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IOneStepKind, StepEntry} from "../interfaces/IStepGame.sol";
import {OneStepElementwise} from "./OneStepElementwise.sol";
import {OneStepExactSum} from "./OneStepExactSum.sol";
import {OneStepGemm} from "./OneStepGemm.sol";
import {OneStepOptim} from "./OneStepOptim.sol";
import {StepKinds} from "./StepKinds.sol";

/// @title StepKindsCore
/// @notice The step game's one-steps of the linear product, ReLU and its backward, add,
/// permute, the exact column sum and SGD (docs/onestep.md). Openings, in order: linear: row
/// `i` of A, row `j` of Bt, `bias[j]` (empty without a bias); relu, column_sum: the element
/// (column_sum: the transposed row); apply_mask, add: one element of each input; permute (of
/// one input, or of several of one size one after another: attention's dq, dk, dv into the
/// qkv layout): the source element in its input; sgd: the element of p, g and the momentum buffer (empty without momentum).
contract StepKindsCore is IOneStepKind {
    using StepKinds for OneStepGemm.Tensor[];
    using StepKinds for OneStepGemm.Opening[];

    bytes32 internal constant LINEAR = keccak256("linear");
    bytes32 internal constant RELU = keccak256("relu");
    bytes32 internal constant APPLY_MASK = keccak256("apply_mask");
    bytes32 internal constant ADD = keccak256("add");
    bytes32 internal constant PERMUTE = keccak256("permute");
    bytes32 internal constant COLUMN_SUM = keccak256("column_sum");
    bytes32 internal constant SGD = keccak256("sgd");

    /// @inheritdoc IOneStepKind
    function element(
        StepEntry.Entry calldata e,
        OneStepGemm.Tensor[] calldata t,
        uint256 index,
        OneStepGemm.Opening[] calldata o
    ) external pure returns (uint256) {
        bytes32 kind = e.kind;
        if (kind == LINEAR) {
            StepKinds.need(t, o, 3);
            (uint256 i, uint256 j) = StepKinds.rowCol(e, index);
            return OneStepGemm.linearElement(t[0], t[1], t[2], e.attributes[0], i, j, o[0], o[1], o[2]);
        }
        if (kind == RELU) {
            StepKinds.need(t, o, 1);
            (uint32 y, uint32 mask) = OneStepElementwise.reluElement(t[0], index, o[0]);
            return e.output == 0 ? y : mask;
        }
        if (kind == APPLY_MASK || kind == ADD) {
            StepKinds.need(t, o, 2);
            return kind == ADD
                ? OneStepElementwise.addElement(t.two(), index, o.two())
                : OneStepElementwise.applyMaskElement(t.two(), index, o.two());
        }
        if (kind == PERMUTE) {
            StepKinds.need(t, o, 1);
            return _permute(e, t, index, o[0]);
        }
        if (kind == COLUMN_SUM) {
            StepKinds.need(t, o, 1);
            return OneStepExactSum.columnSumElement(t[0], index, o[0]);
        }
        if (kind == SGD) {
            StepKinds.need(t, o, 3);
            (uint32 p, uint32 buf) = OneStepOptim.sgdElement(_sgd(e.attributes), t.three(), index, o.three());
            return e.output == 0 ? p : buf;
        }
        revert StepKinds.StepKindUnknown(kind);
    }

    /// @dev Element `index` of the entry's inputs (each of one size) one after another, viewed
    /// as `shape` and permuted by `perm`; `o` opens the source element in its input.
    function _permute(StepEntry.Entry calldata e, OneStepGemm.Tensor[] calldata t, uint256 index, OneStepGemm.Opening calldata o)
        private
        pure
        returns (uint32)
    {
        (uint256[] calldata shape, uint256 next) = StepKinds.list(e.attributes, 0);
        (uint256[] calldata perm,) = StepKinds.list(e.attributes, next);
        uint256 n = _partSize(e.inputs.length, t, shape);
        uint256 s = OneStepElementwise.permuteSource(shape, perm, index);
        return OneStepGemm.openAt(t[s / n], s % n, o);
    }

    /// @dev The size of each of the `parts` inputs, which `shape` must hold exactly
    /// (StepKindArity without inputs, OneStepOperandsMismatch for an input of another size,
    /// OneStepPermutationInvalid for a shape of another size).
    function _partSize(uint256 parts, OneStepGemm.Tensor[] calldata t, uint256[] calldata shape)
        private
        pure
        returns (uint256 n)
    {
        if (parts == 0 || t.length < parts) revert StepKinds.StepKindArity(parts == 0 ? 1 : parts, t.length, 1);
        n = t[0].rows * t[0].cols;
        for (uint256 k = 1; k < parts; ++k) {
            if (t[k].rows * t[k].cols != n) revert OneStepGemm.OneStepOperandsMismatch(k);
        }
        uint256 total = 1;
        for (uint256 k = 0; k < shape.length; ++k) {
            total *= shape[k];
        }
        if (total != parts * n) revert OneStepElementwise.OneStepPermutationInvalid(shape.length, parts * n);
    }

    /// @dev The attributes (lr, weight decay, momentum: float32 bits, one word each) as SGD's
    /// calldata struct (three static words; a value past 32 bits reverts where it is read).
    function _sgd(uint256[] calldata a) private pure returns (OneStepOptim.Sgd calldata s) {
        if (a.length < 3) revert StepKinds.StepKindArity(3, a.length, a.length);
        assembly ("memory-safe") {
            s := a.offset
        }
    }
}
