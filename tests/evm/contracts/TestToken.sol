// SPDX-License-Identifier: MIT
// Test-only ERC-20 with chosen decimals and an open mint: the stablecoin and its quote asset
// in the adapter tests. Built on OpenZeppelin's ERC20 so Transfer events and balances are real.
pragma solidity ^0.8.20;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

contract TestToken is ERC20 {
    uint8 private immutable _decimals;

    constructor(string memory name_, string memory symbol_, uint8 decimals_) ERC20(name_, symbol_) {
        _decimals = decimals_;
    }

    function decimals() public view override returns (uint8) {
        return _decimals;
    }

    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }
}
