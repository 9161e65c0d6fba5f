"""Issue 30's strategy for bench/economics.py: a submitter that withholds or corrupts its data.

The job's shard (or checkpoint) is never served, or served altered: a worker daemon fetches a
task's inputs before it accepts, fails, and declines the offer (``declineTask``: its accept
penalty burned). Here every offered worker declines as the daemon does; the task is offered
to another worker each time (never the one that declined last) until MAX_DECLINES distinct
workers have declined, and the job ends (``JobInputsUnavailable``): each decliner is paid its
penalty back, the rest refunded. The row checks, job by job, the submitter's payoff against
the model and each honest worker's loss against its bound: one accept penalty for each
further offer of the same task it declined (its first decline is repaid).
"""

from __future__ import annotations

from collections import Counter

from devstack import E  # sets sys.path
from economy import Economy, Result
from players import LEAVES
from truetrain.market import economics as model

WORKERS = 4


def withholding(eco: Economy, n: int) -> Result:
    """``n`` one-shard jobs whose inputs nobody can fetch, each declined until it ends."""
    eco.cast()
    b, seen = eco.b, []
    outcome = model.withholding(eco.params)[0].name
    submitter = b.new_submitter()
    workers = [eco.worker() for _ in range(WORKERS)]
    penalty = eco.params.penalty(eco.params.accept_penalty_bps)
    declines = repeats = lost = 0
    for _ in range(n):
        before, held = b.wealth(submitter), {w: b.wealth(w) for w in workers}
        job_id, _ = b.create_job(submitter, 1, rounds=1, leaves=LEAVES, **eco.job_terms())
        by: Counter = Counter()
        while True:
            task_id, worker, _ = b.draw(job_id, eco.keeper)
            receipt = b.receipt(b.market.functions.declineTask(task_id), worker)
            by[worker] += 1
            if b.events(receipt, b.market, "JobInputsUnavailable"):
                break
        for w in workers:
            loss, bound = held[w] - b.wealth(w), penalty * max(by[w] - 1, 0)
            if loss != bound:
                raise SystemExit(f"job {job_id}: worker {w} lost {loss / E:g} TRAIN, bound {bound / E:g}")
            lost += loss
        declines, repeats = declines + sum(by.values()), repeats + sum(c - 1 for c in by.values())
        seen.append((outcome, b.wealth(submitter) - before))
    note = (f"{declines} declines over {n} jobs ({repeats} by a worker offered the same task again); an honest "
            f"worker's loss per task is one accept penalty ({penalty / E:g} TRAIN) per further offer of it that it "
            f"declines, its first decline repaid: measured {lost / E / n:.3f} TRAIN per job over all {WORKERS} "
            f"workers, each within its bound")
    return Result("submitter withholds or corrupts its data", "submitter", model.withholding(eco.params), seen, note)


STRATEGIES = {"withholding": withholding}
