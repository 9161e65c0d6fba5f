// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IOneStepKind, StepEntry} from "../interfaces/IStepGame.sol";
import {Float32} from "./Float32.sol";
import {OneStepGemm} from "./OneStepGemm.sol";
import {OneStepQuant} from "./OneStepQuant.sol";
import {StepKinds} from "./StepKinds.sol";

/// @title StepKindsQuant
/// @notice The step game's one-steps of the quantised products past the linear layer's
/// forward (docs/onestep.md): `row_scales` (input a; attribute limbs), `weight_grad` (inputs
/// g (M, out), a (M, in), row_scales(a); attribute limbs: the program's order and layout),
/// `weight_grad_transposed` (inputs gᵀ (out, M), aᵀ (in, M), row_scales(a); limbs) and `bmm`
/// (inputs a, bt as rows of K: (parts·N·M, K), (parts·N·P, K); attributes limbs, scale
/// (float32), a_part, b_part: which part of each operand's rows, N and M from the output's
/// shape (..., M, P); attention's q, k, v are parts of one tensor). Openings, in order:
/// row_scales: the row; weight_grad: g and a whole, every scale; weight_grad_transposed: row
/// `o` of gᵀ, row `i` of aᵀ, every scale; bmm: row `a_part·N·M + n·M + m` of a, row
/// `b_part·N·P + n·P + p` of bt.
contract StepKindsQuant is IOneStepKind {
    using StepKinds for OneStepGemm.Tensor[];
    using StepKinds for OneStepGemm.Opening[];

    bytes32 internal constant ROW_SCALES = keccak256("row_scales");
    bytes32 internal constant WEIGHT_GRAD = keccak256("weight_grad");
    bytes32 internal constant WEIGHT_GRAD_TRANSPOSED = keccak256("weight_grad_transposed");
    bytes32 internal constant BMM = keccak256("bmm");

    /// @inheritdoc IOneStepKind
    function element(
        StepEntry.Entry calldata e,
        OneStepGemm.Tensor[] calldata t,
        uint256 index,
        OneStepGemm.Opening[] calldata o
    ) external pure returns (uint256) {
        bytes32 kind = e.kind;
        if (kind == ROW_SCALES) {
            uint256 limbs = StepKinds.attrs(e, 1)[0];
            StepKinds.need(t, o, 1);
            return OneStepQuant.rowScaleElement(t[0], limbs, index, o[0]);
        }
        if (kind == WEIGHT_GRAD || kind == WEIGHT_GRAD_TRANSPOSED) {
            uint256 limbs = StepKinds.attrs(e, 1)[0];
            StepKinds.need(t, o, 3);
            (uint256 r, uint256 c) = StepKinds.rowCol(e, index);
            return OneStepQuant.weightGradOf(t.three(), kind == WEIGHT_GRAD_TRANSPOSED, limbs, r, c, o.three());
        }
        if (kind == BMM) {
            StepKinds.need(t, o, 2);
            return _bmm(e, t, index, o);
        }
        revert StepKinds.StepKindUnknown(kind);
    }

    /// @dev Element `index` of the batched product of output shape (..., M, P): part `a_part`
    /// of a's rows (rows `a_part·N·M` on) and part `b_part` of bt's, N the product of the
    /// leading dimensions, each operand's descriptor its rows of K.
    function _bmm(
        StepEntry.Entry calldata e,
        OneStepGemm.Tensor[] calldata t,
        uint256 index,
        OneStepGemm.Opening[] calldata o
    ) private pure returns (uint32) {
        uint256[] calldata a = StepKinds.attrs(e, 4);
        (uint256 i, uint256 j) = _rowsOf(e.shape, t, a[2], a[3], index);
        uint256 k = t[0].cols;
        if (k == 0 || t[1].cols != k) revert OneStepGemm.OneStepOperandsMismatch(1);
        uint256 bits = OneStepGemm.operandBits(a[0]);
        uint32 y = OneStepGemm.dot(OneStepGemm.openRow(t[0], i, o[0]), OneStepGemm.openRow(t[1], j, o[1]), k, bits);
        return Float32.mul(y, uint32(a[1]));
    }

    /// @dev The rows of a and bt that element `index` of output `shape` (..., M, P) reads:
    /// `pa·N·M + n·M + m` and `pb·N·P + n·P + p`.
    function _rowsOf(uint256[] calldata shape, OneStepGemm.Tensor[] calldata t, uint256 pa, uint256 pb, uint256 index)
        private
        pure
        returns (uint256 i, uint256 j)
    {
        (uint256 batches, uint256 m, uint256 p) = _dims(shape);
        if (index >= batches * m * p) revert OneStepGemm.OneStepShapeInvalid(index, batches * m * p);
        i = _part(t[0], pa, batches * m, 0) + index / p;
        j = _part(t[1], pb, batches * p, 1) + index / (m * p) * p + index % p;
    }

    /// @dev An output shape (..., M, P) as (N, M, P), N the product of the leading dimensions.
    function _dims(uint256[] calldata shape) private pure returns (uint256 batches, uint256 m, uint256 p) {
        uint256 d = shape.length;
        if (d < 2) revert OneStepGemm.OneStepShapeInvalid(d, 0);
        batches = 1;
        for (uint256 k = 0; k + 2 < d; ++k) {
            batches *= shape[k];
        }
        (m, p) = (shape[d - 2], shape[d - 1]);
    }

    /// @dev The first row of part `part` of `t` cut into parts of `rows` rows
    /// (OneStepOperandsMismatch(operand) where they do not divide or the part is past them).
    function _part(OneStepGemm.Tensor calldata t, uint256 part, uint256 rows, uint256 operand)
        private
        pure
        returns (uint256)
    {
        if (rows == 0 || t.rows % rows != 0 || part >= t.rows / rows) revert OneStepGemm.OneStepOperandsMismatch(operand);
        return part * rows;
    }
}
