// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {OneStepGemm} from "../numerics/OneStepGemm.sol";

/// @title StepEntry
/// @notice One entry of a step's program as the game opens it (truetrain/trace/program.py):
/// its leaf is `keccak256(abi.encode(kind, output, words, shape, inputs, attributes, dims))`.
library StepEntry {
    /// @notice `kind` = keccak256 of the kind's name; `output` which of the kind's outputs the
    /// entry is; `words` 1 (float32) or 2 (float64) an element; `shape` the output's;
    /// `inputs` one `source << 32 | index` an input (0 an earlier entry, 1 the step's state,
    /// 2 its batch); `attributes` the kind's, in its order; `dims` each input's 2-D
    /// descriptor (rows, cols), two words an input.
    struct Entry {
        bytes32 kind;
        uint256 output;
        uint256 words;
        uint256[] shape;
        uint256[] inputs;
        uint256[] attributes;
        uint256[] dims;
    }
}

/// @title IOneStepKind
/// @notice A one-step verifier of some operator kinds: the element a program entry's output
/// holds at `index`, recomputed from its inputs opened against their roots.
interface IOneStepKind {
    /// @notice Element `index` (flat, row-major; a float64 tensor's element, not word) of
    /// entry `e`'s output: float32 bits, or float64 bits for a float64 kind. `inputs` are the
    /// entry's inputs (agreed roots, the program's descriptors) followed by one empty
    /// descriptor (rows 0: an absent optional operand); `openings` are the kind's, in its
    /// order (docs/onestep.md, "The step game").
    function element(
        StepEntry.Entry calldata e,
        OneStepGemm.Tensor[] calldata inputs,
        uint256 index,
        OneStepGemm.Opening[] calldata openings
    ) external view returns (uint256);
}

/// @title IStepGameReceiver
/// @notice What the contract that opens a step game (DisputeGame) implements: the verdict.
interface IStepGameReceiver {
    /// @notice Game `gameId` ended: `winner` won, `loser` lost (a one-step's result, a clock
    /// run out, or an inconsistency the game proved).
    function stepGameResolved(uint256 gameId, address winner, address loser) external;
}
