// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {ERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/ERC20Permit.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {ITrainToken} from "./interfaces/ITrainToken.sol";

/// @title TrainToken
/// @notice ERC-20 + EIP-2612 permit; owner-mintable and with a faucet on devnets only. On a
/// live chain the whole supply is the initial distribution given to the constructor (see
/// docs/token.md): nobody can ever mint more.
contract TrainToken is ERC20, ERC20Permit, Ownable, ITrainToken {
    /// @notice Tokens the faucet gives per drip.
    uint256 public constant FAUCET_AMOUNT = 1_000 ether;
    /// @notice Blocks between two drips to the same account: a minute of the devnet's 0.25 s
    /// blocks (10 blocks were 2.5 s there, a cooldown in name only).
    uint256 public constant FAUCET_COOLDOWN_BLOCKS = 240;

    /// @inheritdoc ITrainToken
    bool public immutable devnet;
    /// @inheritdoc ITrainToken
    uint256 public totalBurned;
    /// @inheritdoc ITrainToken
    uint256 public totalMinted;

    mapping(address account => uint256 readyAt) private _faucetReadyAt;

    /// @param isDevnet_ true only on a local or test chain: enables mint and faucet forever.
    /// @param holders who receives the initial distribution (the live supply; may be empty on a devnet)
    /// @param amounts what each holder receives, in wei
    constructor(bool isDevnet_, address[] memory holders, uint256[] memory amounts)
        ERC20("truetrain", "TRAIN")
        ERC20Permit("truetrain")
        Ownable(msg.sender)
    {
        if (holders.length != amounts.length) revert TokenInvalidDistribution(holders.length, amounts.length);
        // INVARIANT: a live token has a nonzero supply from its first block on.
        if (!isDevnet_ && holders.length == 0) revert TokenInvalidDistribution(0, 0);
        devnet = isDevnet_;
        for (uint256 i = 0; i < holders.length; ++i) {
            _mintCounted(holders[i], amounts[i]);
            emit InitialAllocation(holders[i], amounts[i]);
        }
    }

    /// @inheritdoc ITrainToken
    function mint(address to, uint256 amount) external onlyOwner {
        _requireDevnet();
        _mintCounted(to, amount);
    }

    /// @inheritdoc ITrainToken
    function faucet() external {
        _requireDevnet();
        uint256 readyAt = _faucetReadyAt[msg.sender];
        if (block.number < readyAt) revert TokenFaucetCooldown(msg.sender, readyAt);
        _faucetReadyAt[msg.sender] = block.number + FAUCET_COOLDOWN_BLOCKS;
        _mintCounted(msg.sender, FAUCET_AMOUNT);
        emit FaucetDripped(msg.sender, FAUCET_AMOUNT);
    }

    /// @inheritdoc ITrainToken
    function burn(uint256 amount) external {
        _burn(msg.sender, amount);
        totalBurned += amount;
        emit TokensBurned(msg.sender, amount, totalBurned);
    }

    function _mintCounted(address to, uint256 amount) private {
        totalMinted += amount;
        _mint(to, amount);
    }

    function _requireDevnet() private view {
        if (!devnet) revert TokenNotDevnet(block.chainid);
    }
}
