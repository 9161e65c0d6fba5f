// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IJobMarket} from "contracts/interfaces/IJobMarket.sol";

/// The group rule of split jobs, read from the market as a keeper would: a stage task is paid
/// only once every other stage of its group is Finalized or past its challenge window.
library Stages {
    /// The first other stage of `id`'s group that is neither Finalized nor past its window (0: none).
    function blocker(IJobMarket market, uint256 id) internal view returns (uint256) {
        IJobMarket.Job memory j = market.jobOf(id >> 64);
        uint32 index = uint32(id);
        if (j.stages < 2 || index >= j.shards) return 0;
        uint32 first = index - index % j.stages;
        for (uint32 k = first; k < first + j.stages; ++k) {
            if (k == index) continue;
            uint256 sibling = (id & ~uint256(type(uint32).max)) | k;
            IJobMarket.Task memory t = market.taskOf(sibling);
            bool settled = t.status == IJobMarket.TaskStatus.Finalized
                || (t.status == IJobMarket.TaskStatus.ChallengeWindow && block.number > t.deadline);
            if (!settled) return sibling;
        }
        return 0;
    }

    /// The first other stage of `id`'s group that nobody holds: never drawn, Pending, Offered
    /// or Closed (0: none). On a stopped job such a stage never runs, so `id` is never paid
    /// and, past its window, `closeTask` is its exit.
    function unheld(IJobMarket market, uint256 id) internal view returns (uint256) {
        IJobMarket.Job memory j = market.jobOf(id >> 64);
        uint32 index = uint32(id);
        if (j.stages < 2 || index >= j.shards) return 0;
        uint32 first = index - index % j.stages;
        for (uint32 k = first; k < first + j.stages; ++k) {
            if (k == index) continue;
            uint256 sibling = (id & ~uint256(type(uint32).max)) | k;
            IJobMarket.TaskStatus s = market.taskOf(sibling).status;
            if (s <= IJobMarket.TaskStatus.Offered || s == IJobMarket.TaskStatus.Closed) return sibling;
        }
        return 0;
    }
}
