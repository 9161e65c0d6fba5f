// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IOneStepKind, StepEntry} from "../interfaces/IStepGame.sol";
import {OneStepGelu} from "./OneStepGelu.sol";
import {OneStepGemm} from "./OneStepGemm.sol";
import {OneStepLayerNorm} from "./OneStepLayerNorm.sol";
import {StepKinds} from "./StepKinds.sol";

/// @title StepKindsNorm
/// @notice The step game's one-steps of GELU and LayerNorm, forward and backward
/// (docs/onestep.md): `gelu` (input x), `gelu_backward` (x, the output gradient g),
/// `layernorm` (x (rows, n), weight, bias; attribute eps, float64 bits), `layernorm_backward`
/// (x, g (rows, n), weight; eps; outputs dx and the gain's per-row term g · xhat).
/// Openings, in order: gelu: the element; gelu_backward: the element of x and of g;
/// layernorm: row `i` of x, `weight[j]`, `bias[j]`; layernorm_backward: row `i` of x and of
/// g, the whole weight.
contract StepKindsNorm is IOneStepKind {
    using StepKinds for OneStepGemm.Tensor[];
    using StepKinds for OneStepGemm.Opening[];

    bytes32 internal constant GELU = keccak256("gelu");
    bytes32 internal constant GELU_BACKWARD = keccak256("gelu_backward");
    bytes32 internal constant LAYERNORM = keccak256("layernorm");
    bytes32 internal constant LAYERNORM_BACKWARD = keccak256("layernorm_backward");

    /// @inheritdoc IOneStepKind
    function element(
        StepEntry.Entry calldata e,
        OneStepGemm.Tensor[] calldata t,
        uint256 index,
        OneStepGemm.Opening[] calldata o
    ) external pure returns (uint256) {
        bytes32 kind = e.kind;
        if (kind == GELU) {
            StepKinds.need(t, o, 1);
            return OneStepGelu.geluElement(t[0], index, o[0]);
        }
        if (kind == GELU_BACKWARD) {
            StepKinds.need(t, o, 2);
            return OneStepGelu.geluBackwardElement(t.two(), index, o.two());
        }
        if (kind == LAYERNORM || kind == LAYERNORM_BACKWARD) {
            uint64 eps = uint64(StepKinds.attrs(e, 1)[0]);
            StepKinds.need(t, o, 3);
            (uint256 i, uint256 j) = StepKinds.rowCol(e, index);
            if (kind == LAYERNORM) return OneStepLayerNorm.layerNormElement(t.three(), eps, i, j, o.three());
            (uint32 dx, uint32 gx) = OneStepLayerNorm.layerNormBackwardElement(t.three(), eps, i, j, o.three());
            return e.output == 0 ? dx : gx;
        }
        revert StepKinds.StepKindUnknown(kind);
    }
}
