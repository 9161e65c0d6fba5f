// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @title ITrainToken: the market's ERC-20 (with EIP-2612 permit)
/// @notice Jobs are paid, stakes held and slashes burned in this token. New tokens can only
/// be minted on a chain that was marked as a devnet when the token was deployed, so the
/// same bytecode on a public chain has a fixed supply.
interface ITrainToken is IERC20 {
    /// @notice Minting was asked for on a chain not marked as a devnet at deployment.
    error TokenNotDevnet(uint256 chainId);
    /// @notice The initial distribution's holders and amounts differ in length, or a live
    /// token was given none.
    error TokenInvalidDistribution(uint256 holders, uint256 amounts);
    /// @notice A faucet drip was asked for before the caller's cooldown ended.
    error TokenFaucetCooldown(address account, uint256 readyAtBlock);

    /// @notice Tokens were burned (slash proceeds); `totalBurned` is the running total.
    event TokensBurned(address indexed from, uint256 amount, uint256 totalBurned);
    /// @notice `holder` received `amount` of the initial distribution at deployment.
    event InitialAllocation(address indexed holder, uint256 amount);
    /// @notice The devnet faucet gave `amount` to `account`.
    event FaucetDripped(address indexed account, uint256 amount);

    /// @notice Mint `amount` to `to`. Owner only, devnets only.
    function mint(address to, uint256 amount) external;

    /// @notice Give the caller the faucet amount, at most once per cooldown. Devnets only.
    function faucet() external;

    /// @notice Burn `amount` of the caller's tokens and count it in `totalBurned`.
    function burn(uint256 amount) external;

    /// @notice Whether this deployment allows minting (set once, at deployment).
    function devnet() external view returns (bool);

    /// @notice All tokens ever burned through `burn`.
    function totalBurned() external view returns (uint256);

    /// @notice All tokens ever minted (the conservation invariant's right-hand side).
    function totalMinted() external view returns (uint256);
}
