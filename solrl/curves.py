"""Training curves: held-out reward against wall-clock and against iteration, one PNG."""
from __future__ import annotations

from pathlib import Path


def plot_training_curve(eval_history: list[dict], out: Path, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    its = [e["iteration"] for e in eval_history]
    minutes = [e["wall_seconds"] / 60 for e in eval_history]
    score = [e["mean_score"] for e in eval_history]
    strict = [e.get("strict_accuracy") for e in eval_history]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, x, label in ((axes[0], minutes, "wall-clock (minutes)"), (axes[1], its, "iteration")):
        ax.plot(x, score, "o-", label="held-out mean reward")
        if all(s is not None for s in strict):
            ax.plot(x, strict, "s--", label="held-out strict accuracy")
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("score")
    axes[0].legend(loc="lower right")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
