// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IOneStepKind, StepEntry} from "../interfaces/IStepGame.sol";
import {OneStepGemm} from "./OneStepGemm.sol";
import {OneStepQuant} from "./OneStepQuant.sol";
import {StepKinds} from "./StepKinds.sol";

/// @title StepKindsQuant
/// @notice The step game's one-steps of the quantised products past the linear layer's
/// forward (docs/onestep.md): `row_scales` (input a; attribute limbs), `weight_grad` (inputs
/// g (M, out), a (M, in), row_scales(a); attribute limbs: the program's order and layout),
/// `weight_grad_transposed` (inputs gᵀ (out, M), aᵀ (in, M), row_scales(a); limbs) and `bmm`
/// (inputs a (N·M, K), bt (N·P, K); attributes limbs, scale (float32); N and M from the
/// output's shape (..., M, P)). Openings, in order: row_scales: the row; weight_grad: g and a
/// whole, every scale; weight_grad_transposed: row `o` of gᵀ, row `i` of aᵀ, every scale;
/// bmm: row `n·M + m` of a, row `n·P + p` of bt.
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

    /// @dev Element `index` of the batched product of output shape (..., M, P): a and bt read
    /// as (N·M, K) and (N·P, K) rows, N the product of the leading dimensions.
    function _bmm(
        StepEntry.Entry calldata e,
        OneStepGemm.Tensor[] calldata t,
        uint256 index,
        OneStepGemm.Opening[] calldata o
    ) private pure returns (uint32) {
        (OneStepGemm.Tensor memory x, OneStepGemm.Tensor memory y, OneStepQuant.Bmm memory b) =
            _operands(e.shape, StepKinds.attrs(e, 2), t);
        uint256 p = e.shape[e.shape.length - 1];
        uint256 mp = x.rows / b.batches * p;
        return OneStepQuant.bmmElement(x, y, b, index / mp, (index % mp) / p, index % p, o.two());
    }

    /// @dev The operands as rows and the product's attributes (N, limbs, scale).
    function _operands(uint256[] calldata shape, uint256[] calldata a, OneStepGemm.Tensor[] calldata t)
        private
        pure
        returns (OneStepGemm.Tensor memory, OneStepGemm.Tensor memory, OneStepQuant.Bmm memory b)
    {
        uint256 d = shape.length;
        if (d < 2) revert OneStepGemm.OneStepShapeInvalid(d, 0);
        b = OneStepQuant.Bmm(1, a[0], uint32(a[1]));
        for (uint256 k = 0; k + 2 < d; ++k) {
            b.batches *= shape[k];
        }
        return (_rows(t[0], b.batches * shape[d - 2], 0), _rows(t[1], b.batches * shape[d - 1], 1), b);
    }

    /// @dev `t`'s elements as `rows` rows (OneStepOperandsMismatch(operand) where they do not divide).
    function _rows(OneStepGemm.Tensor calldata t, uint256 rows, uint256 operand)
        private
        pure
        returns (OneStepGemm.Tensor memory)
    {
        uint256 numel = t.rows * t.cols;
        if (rows == 0 || numel % rows != 0) revert OneStepGemm.OneStepOperandsMismatch(operand);
        return OneStepGemm.Tensor(t.root, rows, numel / rows);
    }
}
