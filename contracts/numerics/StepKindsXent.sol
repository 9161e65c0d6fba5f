// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IOneStepKind, StepEntry} from "../interfaces/IStepGame.sol";
import {OneStepGemm} from "./OneStepGemm.sol";
import {OneStepSoftmax} from "./OneStepSoftmax.sol";
import {OneStepXent} from "./OneStepXent.sol";
import {StepKinds} from "./StepKinds.sol";

/// @title StepKindsXent
/// @notice The step game's one-steps of the cross-entropy (partial sums, gradient, loss) and
/// the causal softmax (row sum, element, backward) (docs/onestep.md). Openings, in order:
/// xent_partial_sum, softmax_row_sum: the row; xent_grad, xent_loss: the logits' row, the
/// partial sums' row, the label; softmax, softmax_backward: the row of each input.
contract StepKindsXent is IOneStepKind {
    using StepKinds for OneStepGemm.Tensor[];
    using StepKinds for OneStepGemm.Opening[];

    bytes32 internal constant PARTIAL_SUM = keccak256("xent_partial_sum");
    bytes32 internal constant GRAD = keccak256("xent_grad");
    bytes32 internal constant LOSS = keccak256("xent_loss");
    bytes32 internal constant ROW_SUM = keccak256("softmax_row_sum");
    bytes32 internal constant SOFTMAX = keccak256("softmax");
    bytes32 internal constant SOFTMAX_BACKWARD = keccak256("softmax_backward");

    /// @inheritdoc IOneStepKind
    function element(
        StepEntry.Entry calldata e,
        OneStepGemm.Tensor[] calldata t,
        uint256 index,
        OneStepGemm.Opening[] calldata o
    ) external pure returns (uint256) {
        bytes32 kind = e.kind;
        (uint256 i, uint256 j) = StepKinds.rowCol(e, index);
        if (kind == PARTIAL_SUM) {
            StepKinds.need(t, o, 1);
            return OneStepXent.partialSumElement(t[0], e.attributes[0], i, j, o[0]);
        }
        if (kind == GRAD) {
            StepKinds.need(t, o, 3);
            return OneStepXent.gradElement(t.three(), e.attributes[0], i, j, o.three());
        }
        if (kind == LOSS) {
            StepKinds.need(t, o, 3);
            return OneStepXent.lossElement(t.three(), index, o.three());
        }
        if (kind == ROW_SUM) {
            StepKinds.need(t, o, 1);
            return OneStepSoftmax.rowSumElement(t[0], index, o[0]);
        }
        if (kind == SOFTMAX) {
            StepKinds.need(t, o, 2);
            return OneStepSoftmax.softmaxElement(t.two(), i, j, o.two());
        }
        if (kind == SOFTMAX_BACKWARD) {
            StepKinds.need(t, o, 2);
            return OneStepSoftmax.softmaxBackwardElement(t.two(), uint32(e.attributes[0]), i, j, o.two());
        }
        revert StepKinds.StepKindUnknown(kind);
    }
}
