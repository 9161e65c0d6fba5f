// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IJobMarket} from "contracts/interfaces/IJobMarket.sol";

/// The group rule of split jobs, read from the market as a keeper would: a stage task is paid
/// only once every other stage of its group is Finalized or past its challenge window.
library Stages {
    /// The first other stage of `id`'s group that is neither Finalized nor past its window (0: none).
    function blocker(IJobMarket market, uint256 id) internal view returns (uint256) {
        return _firstSibling(market, id, _unsettled);
    }

    /// The first other stage of `id`'s group that nobody holds: never drawn, Pending, Offered
    /// or Closed (0: none). On a stopped job such a stage never runs, so `id` is never paid
    /// and, past its window, `closeTask` is its exit.
    function unheld(IJobMarket market, uint256 id) internal view returns (uint256) {
        return _firstSibling(market, id, _notHeld);
    }

    /// The first other stage of `id`'s group (in stage order) whose task meets `pick` (0: none,
    /// or `id` is not a stage of a split job).
    function _firstSibling(IJobMarket market, uint256 id, function(IJobMarket.Task memory) view returns (bool) pick)
        private
        view
        returns (uint256)
    {
        IJobMarket.Job memory j = market.jobOf(id >> 64);
        uint32 index = uint32(id);
        if (j.stages < 2 || index >= j.shards) return 0;
        uint32 first = index - index % j.stages;
        for (uint32 k = first; k < first + j.stages; ++k) {
            if (k == index) continue;
            uint256 sibling = (id & ~uint256(type(uint32).max)) | k;
            if (pick(market.taskOf(sibling))) return sibling;
        }
        return 0;
    }

    function _unsettled(IJobMarket.Task memory t) private view returns (bool) {
        return t.status != IJobMarket.TaskStatus.Finalized
            && (t.status != IJobMarket.TaskStatus.ChallengeWindow || block.number <= t.deadline);
    }

    function _notHeld(IJobMarket.Task memory t) private pure returns (bool) {
        return t.status <= IJobMarket.TaskStatus.Offered || t.status == IJobMarket.TaskStatus.Closed;
    }
}
