"""`solrl report RUN_DIR`: one self-contained HTML page (images inlined) plus the PNGs it shows.

Reads only what a run directory already holds (train/eval/selection JSONL, config.yaml,
summary.json, eval grids, the newest checkpoint's seal), so it works on a finished run, a running
one, or a copied one. A run holding pickled checkpoints is refused (solrl/training/checkpoint.py),
and the configuration is shown with credential-like values redacted (solrl/redaction.py).
"""
from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path

import numpy as np

from .metrics_log import read_jsonl

# per-phase seconds that are sums of other phases: drawn as lines, not stacked
_AGGREGATE_PHASES = ("seconds_rollout", "seconds_iteration", "seconds_reward_total")


def _series(records: list[dict], key: str, x: str = "step") -> tuple[np.ndarray, np.ndarray]:
    pairs = [(r[x], r[key]) for r in records if isinstance(r.get(key), (int, float)) and r.get(x) is not None
             and math.isfinite(r[key])]
    if not pairs:
        return np.zeros(0), np.zeros(0)
    xs, ys = zip(*pairs)
    return np.asarray(xs, float), np.asarray(ys, float)


def _new_figure(panels: int):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 3.6), squeeze=False)
    return plt, fig, axes[0]


def _save(plt, fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_rewards(train: list[dict], evals: list[dict], path: Path) -> Path:
    plt, fig, (by_step, by_time) = _new_figure(2)
    for ax, x, label in ((by_step, "step", "iteration"), (by_time, "wall_seconds", "wall-clock (min)")):
        scale = 60.0 if x == "wall_seconds" else 1.0
        xs, ys = _series(train, "reward_mean", x)
        if xs.size:
            ax.plot(xs / scale, ys, color="tab:blue", alpha=0.5, lw=1, label="train (rollout mean)")
        # Beside the held-out reward, its strict form, the gold check (beside `geneval`) and the referee (nothing
        # trains on it), where the reward has them: a reward that rises while the referee's line falls is gamed.
        for key, style, color, name in (("mean_score", "o-", "tab:red", "held-out"),
                                        ("strict_accuracy", "s--", "tab:orange", "held-out strict accuracy"),
                                        ("gold_accuracy", "D-", "black", "held-out gold accuracy"),
                                        ("referee_accuracy", "^:", "tab:purple", "held-out referee accuracy")):
            xs, ys = _series(evals, key, x if x == "wall_seconds" else "iteration")
            if xs.size:
                ax.plot(xs / scale, ys, style, color=color, lw=2 if key == "mean_score" else 1.2, ms=4, label=name)
        ax.set_xlabel(label)
        ax.set_ylabel("reward / accuracy")
        ax.grid(alpha=0.3)
    by_step.legend(loc="best", fontsize=8)
    by_step.set_title("reward vs iteration")
    by_time.set_title("reward vs wall-clock")
    return _save(plt, fig, path)


def plot_losses(train: list[dict], path: Path) -> Path:
    plt, fig, (losses, other) = _new_figure(2)
    loss_keys = sorted({k for r in train for k in r if k.endswith("loss") or k == "ref_kl"})
    for key in loss_keys:
        xs, ys = _series(train, key)
        if xs.size:
            losses.plot(xs, ys, lw=1.2, label=key)
    losses.set_title("losses")
    for key, color in (("grad_norm", "tab:purple"), ("zero_std_ratio", "tab:gray"), ("old_deviate", "tab:green")):
        xs, ys = _series(train, key)
        if xs.size:
            other.plot(xs, ys, lw=1.2, color=color, label=key)
    other.set_title("gradient norm and batch statistics")
    for ax in (losses, other):
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(loc="best", fontsize=8)
    return _save(plt, fig, path)


def plot_timings(train: list[dict], path: Path) -> Path:
    plt, fig, (stack, rate) = _new_figure(2)
    phases = sorted({k for r in train for k in r if k.startswith("seconds_") and k not in _AGGREGATE_PHASES})
    steps = np.asarray([r["step"] for r in train], float)
    if phases and steps.size:
        values = np.asarray([[r.get(p, 0.0) or 0.0 for r in train] for p in phases], float)
        stack.stackplot(steps, values, labels=[p.removeprefix("seconds_") for p in phases], alpha=0.8)
        stack.legend(loc="upper left", fontsize=7, ncol=2)
    stack.set_title("seconds per iteration, by phase")
    xs, ys = _series(train, "images_per_second")
    if xs.size:
        rate.plot(xs, ys, color="tab:orange", lw=1.2)
    rate.set_title("rollout images per second")
    for ax in (stack, rate):
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3)
    return _save(plt, fig, path)


def plot_proxy_fidelity(selection: list[dict], train: list[dict], path: Path) -> Path:
    """Explore-stage (proxy) reward against the full-precision reward of the same kept seeds."""
    from scipy import stats

    plt, fig, (scatter, trend) = _new_figure(2)
    proxy = np.asarray([p for r in selection for p in r["proxy"]], dtype=float)
    full = np.asarray([f for r in selection for f in r["full"]], dtype=float)
    when = np.asarray([r["step"] for r in selection for _ in r["proxy"]], float)
    ok = np.isfinite(proxy) & np.isfinite(full)
    points = scatter.scatter(proxy[ok], full[ok], c=when[ok], cmap="viridis", s=8, alpha=0.6)
    fig.colorbar(points, ax=scatter, label="iteration")
    rho = stats.spearmanr(proxy[ok], full[ok]).statistic if ok.sum() > 2 else float("nan")
    scatter.set_title(f"kept seeds: proxy vs full reward (Spearman {rho:.2f})")
    scatter.set_xlabel("proxy reward (explore engine)")
    scatter.set_ylabel("full-precision reward")
    for key, label in (("proxy_full_spearman", "within-group Spearman"), ("proxy_reward_std", "proxy std, all N"),
                       ("selected_proxy_std", "proxy std, kept K")):
        xs, ys = _series(train, key)
        if xs.size:
            trend.plot(xs, ys, lw=1.2, label=label)
    trend.set_title("selection statistics")
    trend.set_xlabel("iteration")
    if trend.lines:
        trend.legend(loc="best", fontsize=8)
    for ax in (scatter, trend):
        ax.grid(alpha=0.3)
    return _save(plt, fig, path)


def _img(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'


def _pick_grids(run_dir: Path, evals: list[dict], most: int = 4) -> list[tuple[Path, str]]:
    grids = sorted((run_dir / "eval").glob("iter_*_grid.png")) if (run_dir / "eval").is_dir() else []
    if len(grids) > most:  # first, last and evenly spaced between
        grids = [grids[round(i * (len(grids) - 1) / (most - 1))] for i in range(most)]
    scores = {e.get("iteration"): e.get("mean_score") for e in evals}
    picked = []
    for grid in grids:
        iteration = int(grid.name.split("_")[1])
        score = scores.get(iteration)
        picked.append((grid, f"iteration {iteration}" + (f", held-out {score:.3f}" if score is not None else "")))
    return picked


def _checkpoint_row(run_dir: Path) -> list[tuple[str, str]]:
    """The newest sealed checkpoint and whether its bytes still match the seal."""
    from ..training.checkpoint import CheckpointError, list_checkpoints, verify_checkpoint

    found = list_checkpoints(run_dir / "checkpoints")
    if not found:
        return []
    try:
        verify_checkpoint(found[-1])
        state = "its SHA-256 matches its seal"
    except CheckpointError as exc:
        state = f"WARNING: {exc}"
    return [("newest checkpoint", f"{found[-1].name} (safetensors + JSON; {state})")]


def _summary_rows(run_dir: Path, train: list[dict], evals: list[dict], config: dict) -> list[tuple[str, str]]:
    rows = [("run directory", str(run_dir.resolve())), *_checkpoint_row(run_dir)]
    if config:
        rows += [("model", f"{config.get('model', {}).get('name')} ({config.get('model', {}).get('path') or 'shipped toy base'})"),
                 ("reward", str(config.get("reward", {}).get("name"))),
                 ("rollout family", str(config.get("rollout", {}).get("family"))),
                 ("algorithm", str(config.get("train", {}).get("algorithm", "nft")))]
    engines = sorted({r["explore_engine"] for r in train if r.get("explore_engine")})
    if engines:
        rows.append(("explore engine", "; ".join(engines)))
    if train:
        rows.append(("iterations logged", str(len(train))))
        rows.append(("wall-clock", f"{train[-1].get('wall_seconds', float('nan')) / 60:.1f} min"))
        rows.append(("median seconds per iteration", f"{np.median([r.get('seconds_iteration', np.nan) for r in train]):.2f}"))
    if evals:
        best = max(evals, key=lambda e: e.get("mean_score", -math.inf))
        rows.append(("held-out reward", f"{evals[0]['mean_score']:.4f} -> {evals[-1]['mean_score']:.4f} "
                                        f"(best {best['mean_score']:.4f} at iteration {best.get('iteration')})"))
        reward = config.get("reward", {}).get("name")
        if "strict_accuracy" in evals[-1]:
            what = " (the gold check: the training reward's own strict form)" if reward == "geneval_gold" else ""
            rows.append((f"held-out strict accuracy{what}", _trend(evals, "strict_accuracy")))
        if "gold_accuracy" in evals[-1]:
            rows.append((f"held-out gold accuracy{' (never trained on)' if reward == 'geneval' else ''}", _trend(evals, "gold_accuracy")))
        if "referee_accuracy" in evals[-1]:
            rows.append(("held-out referee accuracy (a fixed CNN nothing trains on)", _referee_row(evals)))
    return rows


def _trend(evals: list[dict], key: str) -> str:
    return f"{evals[0].get(key, 0):.3f} -> {evals[-1][key]:.3f}"


def _referee_row(evals: list[dict]) -> str:
    """The referee's trend, with a warning when the training reward rose while the referee's accuracy or the
    samples' world-likeness fell: the reward is being gamed."""
    first, last = evals[0], evals[-1]
    text = (f"{_trend(evals, 'referee_accuracy')}; samples that look like the world "
            f"{first.get('world_likeness', 0):.3f} -> {last.get('world_likeness', 0):.3f}")
    worst = min(evals, key=lambda e: e.get("referee_accuracy", math.inf))
    if last["mean_score"] > first["mean_score"] and (
            last["referee_accuracy"] < first.get("referee_accuracy", 0) or last.get("world_likeness", 1) < first.get("world_likeness", 0)):
        text += " -- WARNING: the training reward rose while the referee's accuracy fell: reward hacking, look at the grids"
    elif worst["referee_accuracy"] < first.get("referee_accuracy", 0):
        text += f" (lowest {worst['referee_accuracy']:.3f} at iteration {worst.get('iteration')})"
    return text


def write_report(run_dir: str | Path, out_dir: str | Path | None = None) -> Path:
    """Render RUN_DIR's report; returns the path of index.html."""
    import yaml

    from ..redaction import redact
    from ..training.checkpoint import refuse_pickled

    run_dir = Path(run_dir)
    refuse_pickled(run_dir)
    train, evals = read_jsonl(run_dir / "train.jsonl"), read_jsonl(run_dir / "eval.jsonl")
    if not train and not evals:
        raise FileNotFoundError(f"{run_dir} holds no train.jsonl or eval.jsonl; point `solrl report` at a training run's out_dir")
    selection = read_jsonl(run_dir / "selection.jsonl")
    config_file = run_dir / "config.yaml"
    config_text = config_file.read_text() if config_file.exists() else ""
    config = yaml.safe_load(config_text) if config_text else {}
    if isinstance(config, dict) and redact(config) != config:  # a config.yaml written before redaction, or by hand
        config = redact(config)
        config_text = yaml.safe_dump(config, sort_keys=False)
    out = Path(out_dir) if out_dir else run_dir / "report"
    out.mkdir(parents=True, exist_ok=True)

    figures = [("Reward", plot_rewards(train, evals, out / "rewards.png"),
                "Rollout reward (the batch trained on) and held-out reward (fixed prompts and seeds), by iteration and by "
                "wall-clock; with the toy rewards also held-out strict accuracy (the reward's 0/1 form), the gold check "
                "beside `geneval`, and the referee, which nothing trains on.")]
    emulated = (" The explore engine ran EMULATED (exact numerics, fp32 matmul, no low-precision kernel): its seconds are "
                "not what a real kernel takes." if any(r.get("explore_emulated") for r in train) else "")
    if train:
        figures.append(("Losses", plot_losses(train, out / "losses.png"), "Training losses and gradient statistics per iteration."))
        figures.append(("Timings", plot_timings(train, out / "timings.png"), "Where each iteration's seconds went." + emulated))
    if selection:
        figures.append(("Proxy fidelity and selection", plot_proxy_fidelity(selection, train, out / "proxy_fidelity.png"),
                        "Sol-RL: how well the explore engine's reward of each kept seed predicted its full-precision reward."
                        + emulated))
    parts = [f"<h1>solrl run report</h1><p class=sub>{html.escape(str(run_dir))}</p>", "<table>"]
    parts += [f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in _summary_rows(run_dir, train, evals, config)]
    parts.append("</table>")
    for title, png, caption in figures:
        parts.append(f"<h2>{html.escape(title)}</h2><p>{html.escape(caption)}</p>{_img(png, title)}")
    grids = _pick_grids(run_dir, evals)
    if grids:
        parts.append("<h2>Held-out samples over training</h2><p>Same prompts and seeds at every evaluation.</p><div class=grids>")
        parts += [f"<figure>{_img(g, c)}<figcaption>{html.escape(c)}</figcaption></figure>" for g, c in grids]
        parts.append("</div>")
    if config_text:
        parts.append(f"<h2>Configuration</h2><pre>{html.escape(config_text)}</pre>")
    page = out / "index.html"
    page.write_text(_PAGE.format(body="\n".join(parts)))
    (out / "report.json").write_text(json.dumps({"figures": [str(p.name) for _, p, _ in figures],
                                                 "grids": [g.name for g, _ in grids]}, indent=2) + "\n")
    return page


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>solrl run report</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 24px auto; max-width: 1120px; color: #222; }}
h1 {{ margin-bottom: 0; }} .sub {{ color: #666; margin-top: 4px; }}
table {{ border-collapse: collapse; margin: 12px 0; }} th, td {{ text-align: left; padding: 4px 12px; border-bottom: 1px solid #ddd; }}
img {{ max-width: 100%; }} .grids {{ display: flex; flex-wrap: wrap; gap: 12px; }}
figure {{ margin: 0; }} figure img {{ image-rendering: pixelated; width: 260px; }}
pre {{ background: #f6f6f6; padding: 12px; font-size: 12px; overflow-x: auto; }}
</style></head><body>
{body}
</body></html>
"""
