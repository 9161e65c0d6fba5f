// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/// @title ReentrantToken
/// @notice Test double for reentrancy tests: an ERC-20 that, once armed, calls back into
/// `target` with `payload` during its next transfer and bubbles up any revert, the way a
/// hostile token with transfer hooks would. Never deployed outside tests.
contract ReentrantToken is ERC20 {
    address public target;
    bytes public payload;

    constructor() ERC20("reentrant", "REENT") {}

    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    function burn(uint256 amount) external {
        _burn(msg.sender, amount);
    }

    /// @notice Arm the hook: the next transfer calls `target_` with `payload_` (once).
    function arm(address target_, bytes calldata payload_) external {
        target = target_;
        payload = payload_;
    }

    function _update(address from, address to, uint256 value) internal override {
        super._update(from, to, value);
        address hookTarget = target;
        if (hookTarget != address(0)) {
            target = address(0);
            (bool ok, bytes memory ret) = hookTarget.call(payload);
            if (!ok) {
                assembly ("memory-safe") {
                    revert(add(ret, 0x20), mload(ret))
                }
            }
        }
    }
}
