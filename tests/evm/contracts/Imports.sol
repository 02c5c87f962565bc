// SPDX-License-Identifier: MIT
// Published OpenZeppelin contracts the tests deploy unchanged: the proxy the vault sits behind
// and the timelock its ownership moves to.
pragma solidity ^0.8.20;

import {TransparentUpgradeableProxy} from "@openzeppelin/contracts/proxy/transparent/TransparentUpgradeableProxy.sol";
import {TimelockController} from "@openzeppelin/contracts/governance/TimelockController.sol";
