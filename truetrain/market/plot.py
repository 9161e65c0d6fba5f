"""The training plot `job results` writes: mean training loss and held-out accuracy per round."""

from __future__ import annotations

from pathlib import Path


def plot_training(path: Path, rounds: list[int], losses: list[float | None], accuracies: list[float], *,
                  bits_per_byte: bool = False) -> Path:
    """Write a PNG with loss (left axis) and held-out accuracy (or a language model's bits
    per byte) on the right axis, against the round number."""
    import matplotlib

    matplotlib.use("Agg")  # no display: the plot only goes to a file
    import matplotlib.pyplot as plt

    fig, loss_axis = plt.subplots(figsize=(6, 4), dpi=100)
    try:
        known = [(r, loss) for r, loss in zip(rounds, losses) if loss is not None]
        loss_axis.plot([r for r, _ in known], [loss for _, loss in known], "o-", color="tab:blue",
                       label="mean training loss")
        loss_axis.set_xlabel("round")
        loss_axis.set_ylabel("mean training loss", color="tab:blue")
        loss_axis.set_xticks(rounds)
        accuracy_axis = loss_axis.twinx()
        if bits_per_byte:
            accuracy_axis.plot(rounds, accuracies, "s-", color="tab:orange", label="held-out bits per byte")
            accuracy_axis.set_ylabel("held-out bits per byte", color="tab:orange")
        else:
            accuracy_axis.plot(rounds, [100 * a for a in accuracies], "s-", color="tab:orange",
                               label="held-out accuracy")
            accuracy_axis.set_ylabel("held-out accuracy (%)", color="tab:orange")
            accuracy_axis.set_ylim(0, 100)
        loss_axis.set_title("training by round")
        fig.tight_layout()
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
    return path
