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
        gold = [e.get("gold_accuracy") for e in eval_history]
        if all(g is not None for g in gold):  # the gold check: never trained on (toyworld/gold.py)
            ax.plot(x, gold, "D-", color="black", label="held-out gold accuracy")
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("score")
    return _finish(fig, axes, out, title)


def _finish(fig, axes, out: Path, title: str) -> Path:
    import matplotlib.pyplot as plt

    axes[0].legend(loc="lower right")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def plot_family_curves(histories: dict[str, list[dict]], out: Path, title: str = "") -> Path:
    """Held-out reward of several runs against wall-clock and against iteration, in one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for name, history in histories.items():
        score = [e["mean_score"] for e in history]
        axes[0].plot([e["wall_seconds"] / 60 for e in history], score, "o-", ms=3, label=name)
        axes[1].plot([e["iteration"] for e in history], score, "o-", ms=3, label=name)
    axes[0].set_xlabel("wall-clock (minutes)")
    axes[1].set_xlabel("iteration")
    axes[0].set_ylabel("held-out mean reward")
    for ax in axes:
        ax.grid(alpha=0.3)
    return _finish(fig, axes, out, title)
