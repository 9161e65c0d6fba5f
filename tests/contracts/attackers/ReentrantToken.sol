// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @dev The market functions the attacker calls back into (declared inline: this file is
/// compiled alone with brownie.compile_source and cannot import project files).
interface IMarketTarget {
    function withdraw() external;
    function cancelJob(uint256 jobId) external;
}

/// @title MarketAttackToken
/// @notice A hostile ERC-20 for the market's tests. mode 0: honest. mode 1: `transfer`
/// calls back `withdraw()` on the market. mode 2: `transfer` calls back `cancelJob(jobId)`.
/// mode 3: `transfer` returns false. mode 4: `transferFrom` keeps a 1 % fee.
/// Reverts in the callback bubble up unchanged.
contract MarketAttackToken {
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;
    uint256 public totalSupply;
    uint8 public mode;
    address public market;
    uint256 public jobId;

    function mint(address to, uint256 amount) external {
        balanceOf[to] += amount;
        totalSupply += amount;
    }

    function arm(uint8 mode_, address market_, uint256 jobId_) external {
        mode = mode_;
        market = market_;
        jobId = jobId_;
    }

    function approve(address spender, uint256 amount) external returns (bool) {
        allowance[msg.sender][spender] = amount;
        return true;
    }

    function transfer(address to, uint256 amount) external returns (bool) {
        if (mode == 3) return false;
        _move(msg.sender, to, amount);
        if (mode == 1) IMarketTarget(market).withdraw();
        if (mode == 2) IMarketTarget(market).cancelJob(jobId);
        return true;
    }

    function transferFrom(address from, address to, uint256 amount) external returns (bool) {
        allowance[from][msg.sender] -= amount;
        uint256 fee = mode == 4 ? amount / 100 : 0;
        _move(from, to, amount - fee);
        if (fee != 0) {
            balanceOf[from] -= fee;
            totalSupply -= fee;
        }
        return true;
    }

    function _move(address from, address to, uint256 amount) private {
        balanceOf[from] -= amount;
        balanceOf[to] += amount;
    }
}
