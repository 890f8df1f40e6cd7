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
        if all(g is not None for g in gold):  # the gold check beside `geneval` (under geneval_gold it is `strict`)
            ax.plot(x, gold, "D-", color="black", label="held-out gold accuracy")
        referee = [e.get("referee_accuracy") for e in eval_history]
        if all(r is not None for r in referee):  # the referee: a fixed CNN nothing trains on (toyworld/referee.py)
            ax.plot(x, referee, "^:", color="tab:purple", label="held-out referee accuracy")
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


METRIC_LABELS = {"mean_score": "held-out mean reward", "strict_accuracy": "held-out strict accuracy",
                 "gold_accuracy": "held-out gold accuracy", "referee_accuracy": "held-out referee accuracy"}


def plot_family_curves(histories: dict[str, list[dict]], out: Path, title: str = "",
                       metrics: tuple[str, ...] = ("mean_score",)) -> Path:
    """Several runs' held-out metrics against time (left) and iteration (right), a row per metric. Time is the
    training time (`train_seconds`: wall-clock less every evaluation, the clock of the time budget and of time
    to target) where every evaluation has it, else the wall-clock of older logs.
    Where a history carries `<metric>_ci` (means over seeds), the 95% interval is drawn as a band; a last row
    marked `final` (the seeds' last evaluations, bench.aggregate_seeds) gets an open circle."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [m for m in metrics if any(m in e for h in histories.values() for e in h)] or ["mean_score"]
    clock = "train_seconds" if all("train_seconds" in e for h in histories.values() for e in h) else "wall_seconds"
    fig, axes = plt.subplots(len(metrics), 2, figsize=(11, 3.6 * len(metrics)), squeeze=False)
    for row, metric in zip(axes, metrics):
        for name, history in histories.items():
            evals = [e for e in history if metric in e]
            y = [e[metric] for e in evals]
            ci = [e.get(f"{metric}_ci") for e in evals]
            for ax, x in ((row[0], [e[clock] / 60 for e in evals]), (row[1], [e["iteration"] for e in evals])):
                line, = ax.plot(x, y, "o-", ms=3, label=name)
                if evals and evals[-1].get("final"):  # the seeds' finals at the budget, at their mean iteration
                    ax.plot(x[-1], y[-1], "o", ms=7, mfc="none", color=line.get_color())
                if y and all(c is not None and c == c for c in ci):  # nan: a single seed, no band
                    ax.fill_between(x, [v - c for v, c in zip(y, ci)], [v + c for v, c in zip(y, ci)],
                                    color=line.get_color(), alpha=0.15, lw=0)
        row[0].set_ylabel(METRIC_LABELS.get(metric, metric))
        for ax in row:
            ax.grid(alpha=0.3)
    axes[-1][0].set_xlabel("training time (minutes, evaluations left out)" if clock == "train_seconds" else "wall-clock (minutes)")
    axes[-1][1].set_xlabel("iteration")
    return _finish(fig, axes[0], out, title)
