// SPDX-License-Identifier: MIT
// Test-only price feed implementing Chainlink's published AggregatorV2V3Interface (from
// @chainlink/contracts) and emitting AnswerUpdated/NewRound on every update the way Chainlink's
// OCR aggregators do; Chainlink's own MockV3Aggregator emits no events, so it cannot test
// the adapter's log backfill.
pragma solidity ^0.8.20;

import {AggregatorV2V3Interface} from "@chainlink/contracts/src/v0.8/shared/interfaces/AggregatorV2V3Interface.sol";

contract TestAggregator is AggregatorV2V3Interface {
    uint256 public constant override version = 4;
    uint8 public immutable override decimals;
    string public override description;
    int256 public override latestAnswer;
    uint256 public override latestTimestamp;
    uint256 public override latestRound;
    mapping(uint256 => int256) public override getAnswer;
    mapping(uint256 => uint256) public override getTimestamp;

    constructor(uint8 decimals_, int256 initialAnswer, string memory description_) {
        decimals = decimals_;
        description = description_;
        updateAnswer(initialAnswer);
    }

    function updateAnswer(int256 answer) public {
        latestRound++;
        latestAnswer = answer;
        latestTimestamp = block.timestamp;
        getAnswer[latestRound] = answer;
        getTimestamp[latestRound] = block.timestamp;
        emit NewRound(latestRound, msg.sender, block.timestamp);
        emit AnswerUpdated(answer, latestRound, block.timestamp);
    }

    function getRoundData(uint80 roundId)
        external
        view
        override
        returns (uint80, int256, uint256, uint256, uint80)
    {
        return (roundId, getAnswer[roundId], getTimestamp[roundId], getTimestamp[roundId], roundId);
    }

    function latestRoundData() external view override returns (uint80, int256, uint256, uint256, uint80) {
        uint80 r = uint80(latestRound);
        return (r, latestAnswer, latestTimestamp, latestTimestamp, r);
    }
}
