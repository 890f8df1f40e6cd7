"""The builders of the docs' summary tables: each a pure function of the results files (a dict of
`topic/name` -> result, as results.all_results reads them) that returns a markdown table. tables.py
puts each into the page region that names it."""
from __future__ import annotations

from collections.abc import Callable

from .confirmation import confirmation_sentence, confirmation_status, power_table
from .exploration import forest_table, headline_paragraph, pattern_sentence
from .cpu_tables import default_run_by_cpu, test_suite
from .results import values
from .table_parts import link, markdown, mean_ci, ratio, record, short_machine

TABLES: dict[str, Callable[[dict], str]] = {}
# docs/where-exploration-pays.md and docs/confirmation.md (their builders live beside their analyses)
TABLES.update({"exploration-forest": forest_table, "exploration-headline": headline_paragraph,
               "exploration-pattern": pattern_sentence, "exploration-confirmation": confirmation_status,
               "exploration-power": power_table, "exploration-confirmation-readme": confirmation_sentence})
# docs/getting-started.md and docs/cpu-kinds.md: what each CPU kind gets
TABLES.update({"default-run-by-cpu": default_run_by_cpu, "test-suite": test_suite})


def table(name: str):
    def register(builder):
        TABLES[name] = builder
        return builder
    return register


def default_run_figures(results: dict) -> dict:
    r = results["default-run/default_run_5min"]
    base = record(r, "base", seed=None)
    return {"result": r, "base": base, "strict": mean_ci(r, "strict_accuracy", "diffusionnft"),
            "referee": mean_ci(r, "referee_accuracy", "diffusionnft"),
            "strict_gains": ", ".join(f"+{v - base['strict_accuracy']:.3f}" for v in values(r, "strict_accuracy", "diffusionnft")),
            "referee_gains": ", ".join(f"+{v - base['referee_accuracy']:.3f}" for v in values(r, "referee_accuracy", "diffusionnft")),
            "seeds": len(values(r, "strict_accuracy", "diffusionnft"))}


def referee_of_then(result: dict) -> str:
    """A clause for a figure read by the judges before the referee shipped now (its training record has the date;
    the gold check's blob rules came the same day)."""
    import json
    from pathlib import Path

    shipped = json.loads((Path(__file__).resolve().parents[1] / "assets" / "toy_referee" / "training.json").read_text())["date"]
    return f"; read by the gold check and the referee of then, both revised on {shipped}" if result["date"] < shipped else ""


@table("default-run")
def default_run_sentence(results: dict) -> str:
    f = default_run_figures(results)
    r = f["result"]
    return (f"Over {f['seeds']} seeds, 5 minutes each, the share of held-out samples that pass the gold check rose from "
            f"{f['base']['strict_accuracy']:.3f} to {f['strict']} (mean ± 95% interval; gains {f['strict_gains']}), and the referee, a judge that "
            f"shares no rule with the reward and that nothing trains on, agrees: {f['base']['referee_accuracy']:.3f} to "
            f"{f['referee']} (gains {f['referee_gains']}); neither fell under the base at any evaluation "
            f"({short_machine(r)}, {r['date']}, {r['summary']['iterations']} iterations{referee_of_then(r)}; "
            f"{link('default-run/default_run_5min', results, 'data', base='')}).\n")


def key_rows(results: dict, base: str) -> list[list[str]]:
    rows = []
    f = default_run_figures(results)
    rows.append(["the default run, 5 min, 3 seeds", f"strict accuracy {f['base']['strict_accuracy']:.3f} -> {f['strict']}; "
                 f"referee {f['base']['referee_accuracy']:.3f} -> {f['referee']}", f["result"]])
    b = results["toy-world/base_model_heldout"]
    gold = record(b, "geneval_gold", seed=None)
    rows.append(["the shipped toy base, held out", f"gold check {gold['strict_accuracy']:.3f}, referee {gold['referee_accuracy']:.3f}, "
                 f"`geneval_gold` score {gold['mean_score']:.3f}", b])
    a = results["toy-world/adversarial_set"]
    bad = [x for x in a["records"] if x["group"] != "ground-truth render"]
    giant, tinted = record(a, "giant"), record(a, "tinted_grey")
    rows.append([f"the adversarial set, {len(bad)} kinds", f"`geneval_gold` passes none (highest score "
                 f"{max(x['geneval_gold_score'] for x in bad):.3f}), referee at most {max(x['referee_correct'] for x in bad):.3f}; "
                 f"`geneval` pays a giant object {giant['geneval_score']:.3f}, a grey canvas {tinted['geneval_score']:.3f}", a])
    k = results["default-run/reference_kl_200"]
    no_kl, kl = record(k, "train.nft.ref_kl_coef=0"), record(k, "train.nft.ref_kl_coef=1e-1")
    rows.append(["the reference KL, 200 iterations, seed 0", f"without it the referee falls from {max(no_kl['referee_accuracy_curve']):.3f} "
                 f"to {no_kl['referee_accuracy']:.3f} (base {no_kl['referee_accuracy_curve'][0]:.3f}); at 1e-1 strict "
                 f"{kl['strict_accuracy']:.3f}, referee {kl['referee_accuracy']:.3f}", k])
    p = results["probe/probe_explore_cost_avx512bf16_contiguous"]
    rows.append(["proxy fidelity, bf16 at 6 steps vs fp32 at 10", f"Spearman {record(p, 'bf16')['spearman']:.2f}, top/bottom-K match "
                 f"{record(p, 'bf16')['selection_match']:.2f} (32 prompts x 48 seeds)", p])
    c = results["explore-cost/explore_cost_amx_bf16"]
    sol, naive = record(c, "sol_rl", compile="model"), record(c, "naive_scaling", compile="model")
    rows.append(["toy rollout, bf16 explore, compiled", f"sol_rl {sol['rollout_seconds']:.2f} s against naive_scaling "
                 f"{naive['rollout_seconds']:.2f} s ({ratio(naive['rollout_seconds'], sol['rollout_seconds'])}); explore cost "
                 f"{sol['explore_cost_per_image_step']:.2f} of a regeneration step (paper: about 0.3)", c])
    g = results["gpu/engine_sd35m_h200_reference_layers"]
    pol, fp8 = record(g, "lora_policy", compile="compiled"), record(g, "fp8_torchao", compile="compiled")
    ns, sr = record(g, "rollout naive_scaling", compile="compiled"), record(g, "rollout sol_rl", compile="compiled")
    rows.append(["SD3.5-M size, 1024 px, compiled", f"torchao's Float8 engine forward {ratio(pol['forward_ms'], fp8['forward_ms'])} the LoRA policy's; "
                 f"rollout (solrl's own FP8 of then) {sr['rollout_seconds']:.1f} s against naive_scaling {ns['rollout_seconds']:.1f} s "
                 f"({ratio(ns['rollout_seconds'], sr['rollout_seconds'])})", g])
    s = results["gpu/sd35l_preset_h200"]
    sol, naive = record(s, "sol_rl", call="second call"), record(s, "naive_scaling", call="second call")
    rows.append(["the SD3.5-L preset as shipped, one prompt group", f"rollout {ratio(naive['seconds_rollout'], sol['seconds_rollout'])}, "
                 f"iteration {ratio(naive['seconds_iteration'], sol['seconds_iteration'])} naive_scaling's; peak "
                 f"{sol['peak_memory_gib']:.1f} GiB (estimate {sol['estimated_peak_gib']:.1f})", s])
    return [[what, figure, f"{short_machine(r)}, {r['date']}", link(str(r['_path'].with_suffix('')).split('results/')[-1], results,
                                                                    "data", base)] for what, figure, r in rows]


@table("key-measurements")
def key_measurements(results: dict, base: str = "") -> str:
    """The README's (links from the top); key-measurements-docs is the same table for a page in docs/."""
    return markdown(["what", "measured", "where, when", "file"], key_rows(results, base))


@table("gpu-runs")
def gpu_runs(results: dict) -> str:
    rows = []
    s = results["gpu/sd35l_preset_h200"]
    for group, call in (("sol_rl", "second call"), ("naive_scaling", "second call"), ("naive_scaling_eager", "first call")):
        r = record(s, group, call=call)
        sec = lambda k: f"{r[k]:.1f}" if r.get(k) is not None else ""  # noqa: E731
        what = {"sol_rl": "sol_rl, fp8 explore (N 96, 6 steps), bf16 regeneration (K 24, 10 steps), compiled",
                "naive_scaling": "naive_scaling, 96 in bf16 at 10 steps, compiled",
                "naive_scaling_eager": "naive_scaling, eager (rollout only)"}[group]
        rows.append([f"SD3.5-L preset: {what}", sec("seconds_explore"), sec("seconds_regenerate"), sec("seconds_rollout"),
                     sec("seconds_train"), sec("seconds_iteration"), f"{r['peak_memory_gib']:.1f} / {r['estimated_peak_gib']:.1f}",
                     link("gpu/sd35l_preset_h200", results, s["date"])])
    g = results["gpu/engine_sd35m_h200_reference_layers"]
    for family in ("sol_rl", "naive_scaling"):
        for scope in ("compiled", "eager"):
            r = record(g, f"rollout {family}", compile=scope)
            rows.append([f"SD3.5-M size, batch 24: {family}, {scope}", "", "", f"{r['rollout_seconds']:.1f}", "", "", "",
                         link("gpu/engine_sd35m_h200_reference_layers", results, g["date"])])
    return markdown(["one H200, 1024 px, one prompt group", "explore s", "regenerate s", "rollout s", "train s",
                     "iteration s", "peak GiB / estimate", "data"], rows)


@table("adversarial-set")
def adversarial_set(results: dict) -> str:
    a = results["toy-world/adversarial_set"]
    rows = [[x["group"], x["images"], f"{x['geneval_score']:.3f}", f"{x['geneval_strict']:.3f}", f"{x['geneval_gold_score']:.3f}",
             f"{x['gold_check_pass']:.3f}", f"{x['referee_correct']:.3f}"] for x in a["records"]]
    return (markdown(["image", "images", "`geneval` score", "`geneval` strict", "`geneval_gold` score", "gold check passes",
                      "referee-correct"], rows)
            + f"\n{short_machine(a)}, {a['date']}: {link('toy-world/adversarial_set', results, 'data')}.\n")


REFEREE_COPIES = {"clean": "ground-truth renders", "antialiased": "anti-aliased", "shifted": "shifted 1 px",
                  "colour_jitter": "colour jitter +-3", "jpeg_75": "JPEG, quality 75 (target)",
                  "light_noise": "noise, sigma 4 (target)", "jpeg_50": "JPEG, quality 50", "noise_sigma_8": "noise, sigma 8",
                  "blur_0_5": "blur, sigma 0.5 px", "colour_cast_8": "colour cast (-8, -4, +6)"}


@table("referee-robustness")
def referee_robustness(results: dict) -> str:
    """The newest results/referee/referee_*.json: the copies row by row, then the highest of the images it must refuse."""
    name = max(n for n in results if n.startswith("referee/referee_"))
    r = results[name]
    copies = [x for x in r["records"] if x["group"] in REFEREE_COPIES]
    refused = [x for x in r["records"] if x["group"] not in REFEREE_COPIES]
    cell = lambda x, key: f"{x[key]:.3f}" if key in x else ""  # noqa: E731
    rows = [[REFEREE_COPIES[x["group"]], x["images"], cell(x, "geneval_gold_score"), cell(x, "gold_check_pass"),
             cell(x, "referee_correct"), cell(x, "share_of_clean"), cell(x, "referee_correct_before")] for x in copies]
    for x in sorted(refused, key=lambda x: -x["referee_correct"])[:3]:   # the three it refuses least
        draws = f", {x['draws']} draws: the worst {x['referee_correct_worst_draw']:.3f}" if x.get("draws") else ""
        rows.append([f"must refuse: {x['group'].replace('_', ' ')}", x["images"], "", "", f"{x['referee_correct']:.3f}{draws}",
                     "", cell(x, "referee_correct_before")])
    rest = sorted(refused, key=lambda x: -x["referee_correct"])[3:]
    rows.append([f"must refuse: the other {len(rest)} kinds, the highest", "", "", "",
                 f"{max(x['referee_correct'] for x in rest):.3f}", "", ""])
    return (markdown(["images", "count", "`geneval_gold` score", "gold check passes", "referee-correct",
                      "referee: share of the renders'", "the referee before"], rows)
            + f"\n{short_machine(r)}, {r['date']}: {link(name, results, 'data')}.\n")


@table("toy-base")
def toy_base(results: dict) -> str:
    b = results["toy-world/base_model_heldout"]
    gold, gen = record(b, "geneval_gold"), record(b, "geneval")
    rows = [["`geneval_gold` (the presets')", f"{gold['mean_score']:.3f}", f"{gold['strict_accuracy']:.3f} (the gold check)",
             f"{gold['referee_accuracy']:.3f}", f"{gold['world_likeness']:.3f}"],
            ["`geneval`", f"{gen['mean_score']:.3f}", f"{gen['strict_accuracy']:.3f}", "", ""]]
    return (markdown(["reward", "score", "strict accuracy", "referee accuracy", "world-likeness"], rows)
            + f"\n{b['settings']['eval.seeds_per_prompt']} seeds per prompt; {short_machine(b)}, {b['date']}: "
              f"{link('toy-world/base_model_heldout', results, 'data')}.\n")


@table("key-measurements-docs")
def key_measurements_docs(results: dict) -> str:
    return key_measurements(results, "../")


@table("explore-cost")
def explore_cost(results: dict) -> str:
    """One row per rollout measurement: eager and compiled whole (the faster of the compiled scopes is in the file)."""
    rows = []
    for name in sorted(n for n in results if n.startswith(("explore-cost/explore_cost_", "explore-cost/compile_"))):
        r = results[name]
        s = r["settings"]
        cells = {}
        for scope in ("eager", "model"):
            sol, naive = record(r, "sol_rl", compile=scope), record(r, "naive_scaling", compile=scope)
            cells[scope] = (f"{sol['rollout_seconds']:.2f} / {naive['rollout_seconds']:.2f} = "
                            f"{ratio(naive['rollout_seconds'], sol['rollout_seconds'])}", sol.get("explore_cost_per_image_step"))
        layers = "every linear" if "explore_layers=all" in str(r["command"]) else "reference"
        c = cells["model"][1]
        rows.append([short_machine(r), r["date"], s["model"], f"{s['rollout.explore_precision']}, {s['rollout.explore_steps']} steps, {layers}",
                     cells["eager"][0], cells["model"][0], f"{c:.2f}" if c is not None else "", link(name, results, "data")])
    return markdown(["CPU", "date", "model", "explore", "eager: sol_rl s / naive_scaling s", "compiled whole", "c, compiled", "file"],
                    rows)


@table("proxy-fidelity")
def proxy_fidelity(results: dict) -> str:
    rows = []
    for name in sorted(n for n in results if n.startswith("probe/")):
        r = results[name]
        for x in r["records"]:
            rows.append([short_machine(r), r["date"], r["settings"]["model"],
                         f"{x['group']}, {x['explore_steps']} steps {x['solver']}" + (f", layers {x['explore_layers']}" if "explore_layers" in x else ""),
                         "real" if x.get("explore_real_kernel") else "emulated", f"{x['spearman']:.3f}", f"{x['selection_match']:.2f}",
                         link(name, results, name.split("/")[1])])
    return markdown(["CPU", "date", "model", "explore engine", "kernel", "Spearman", "top/bottom-K match", "file"], rows)


@table("results-index")
def results_index(results: dict) -> str:
    rows = [[link(name, results, name), r["title"], short_machine(r), r["date"],
             "measured" if r["source"] == "measured" else r["source"].split(" as of")[0]] for name, r in sorted(results.items())]
    return markdown(["file", "what", "where", "when", "source"], rows)


@table("exploration-studies")
def exploration_studies(results: dict) -> str:
    """Every exploration study file: what ran, where and when, each family's seeds and how many reached the target."""
    rows = []
    studies = [n for n in results if n.startswith("exploration/") and "records" in results[n]
               and "target" in results[n].get("settings", {})]
    for name in sorted(studies, key=lambda n: (results[n]["date"], n)):
        r = results[name]
        groups = list(dict.fromkeys(x["group"] for x in r["records"]))
        counts = []
        for g in groups:
            recs = [x for x in r["records"] if x["group"] == g]
            reached = sum(1 for x in recs if x.get("reached"))
            counts.append(f"{g} {reached}/{len(recs)}")
        rows.append([r["settings"].get("regime_label", r["title"]), r["date"], short_machine(r),
                     f"{r['settings']['target']:.3f} {r['settings'].get('target_metric', '').replace('_', ' ')}",
                     "; ".join(counts), link(name, results, name.split("/")[1])])
    return markdown(["study", "date", "where", "target", "seeds that reached it, per family", "file"], rows)


@table("distributed-toy")
def distributed_toy(results: dict) -> str:
    r = results["training/distributed_toy_2procs"]
    rows = [[x["group"], x["seconds_iteration"], x["seconds_explore"], x["seconds_regenerate"], x["seconds_train"],
             x["seconds_refresh_and_resync"]] for x in r["records"]]
    return (markdown(["train.parallel", "s / iteration", "explore", "regenerate", "train", "old refresh + engine re-sync"], rows)
            + f"\n{r['machine']}, {r['date']}, {r['settings']['model']}, medians of iterations 2-4: "
              f"{link('training/distributed_toy_2procs', results, 'data')}.\n")


OCR_SETTINGS = ("reference", "bundled", "before")  # bench/ocr_agreement.py's arms


def ocr_agreement_table(result: dict) -> str:
    """Per OCR engine setting: images read to the reference setting's reward and text, the mean reward and
    the mean absolute difference (records: group = setting, seed = image)."""
    by = {name: {r["seed"]: r for r in result["records"] if r["group"] == name} for name in OCR_SETTINGS}
    ref, n = by["reference"], len(by["reference"])
    rows = []
    for name in OCR_SETTINGS:
        got = by[name]
        same = sum(abs(got[i]["reward"] - ref[i]["reward"]) < 1e-9 for i in ref)
        text = sum(got[i]["text"].replace(" ", "").lower() == ref[i]["text"].replace(" ", "").lower() for i in ref)
        diff = sum(abs(got[i]["reward"] - ref[i]["reward"]) for i in ref) / n
        mean = sum(got[i]["reward"] for i in ref) / n
        rows.append([name, f"{same} / {n} ({100 * same / n:.0f}%)", f"{text} / {n}", f"{mean:.3f}", f"{diff:.3f}"])
    return markdown(["setting", "same reward as the reference", "same text", "mean reward", "mean abs difference"], rows)


@table("ocr-agreement")
def ocr_agreement(results: dict) -> str:
    r = results["rewards/ocr_agreement"]
    return (ocr_agreement_table(r) + f"\n{r['settings']['images']} images, {r['machine']}, {r['date']}: "
            f"{link('rewards/ocr_agreement', results, 'data')}.\n")


@table("preset-costs")
def preset_costs(results: dict) -> str:
    """Each GPU model's presets on one H100 and on eight, as `solrl check` estimates them (one row per model: its
    presets differ in the reward alone, so only the peak memory moves, given as a range)."""
    c = results["preflight/preset_costs"]
    by_model: dict[str, list[dict]] = {}
    for r in c["records"]:
        if r["group"] != "calibration check":
            by_model.setdefault(r["group"].split("_")[0], []).append(r)
    rows = []
    for model, recs in by_model.items():
        one = [r for r in recs if r["gpus"] == 1]
        eight = [r for r in recs if r["gpus"] == 8]
        peaks = sorted({r["peak_memory_gib"] for r in one})
        peak = f"{peaks[0]:.0f}" if len(peaks) == 1 or round(peaks[0]) == round(peaks[-1]) else f"{peaks[0]:.0f}-{peaks[-1]:.0f}"
        days = lambda h: f"{h:.0f} h" if h < 48 else f"{h / 24:.1f} days"  # noqa: E731
        rows.append([", ".join(f"`{r['group']}`" for r in one), f"{one[0]['seconds_per_iteration'] / 60:.0f} min",
                     days(one[0]["hours_run"]), f"{eight[0]['seconds_per_iteration'] / 60:.1f} min", days(eight[0]["hours_run"]),
                     str(eight[0]["gpu_hours"]), peak])
    checks = "; ".join(f"{r['what']}: measured {r['measured_over_estimated']:.2f}x the estimate"
                       for r in c["records"] if r["group"] == "calibration check")
    return (markdown(["presets", "1 GPU: iteration", "1 GPU: the run", "8 GPUs: iteration", "8 GPUs: the run",
                      "8 GPUs: GPU-hours", "peak GiB per GPU"], rows)
            + f"\nEstimates, not measurements ({c['date']}, {link('preflight/preset_costs', results, 'data')}): "
              f"{c['settings']['gpu']}; calibrated on one measured SD3.5-L iteration. Held against GPU runs it was not "
              f"calibrated on: {checks}.\n")


@table("forecast-calibration")
def forecast_calibration(results: dict) -> str:
    """The five ratios `solrl check`'s time estimate carries from the one measured SD3.5-L iteration to other runs
    (solrl/preflight/forecast.py computes them from the same records; a test holds its constants to this file)."""
    s = results["gpu/sd35l_preset_h200"]
    sol, eager, compiled = (record(s, "sol_rl", call="second call"), record(s, "naive_scaling_eager", call="first call"),
                            record(s, "naive_scaling", call="first call"))
    g = results["gpu/engine_sd35m_h200_reference_layers"]
    policy = record(g, "lora_policy", compile="compiled")["forward_ms"]
    c = results["preflight/preset_costs"]
    forward = sol["seconds_regenerate"] / (24 * 10)
    rest = sol["seconds_iteration"] - sol["seconds_rollout"] - sol["seconds_train"]
    rows = [
        ["the compiled policy's forward, per sample", f"{forward * 1000:.1f} ms = {c['settings']['calibration_peak_efficiency']:.0%} "
         "of the H200's dense bf16 peak for SD3.5-L's FLOPs", "regeneration: 24 samples x 10 steps", link("gpu/sd35l_preset_h200", results)],
        ["the explore engine's forward / the policy's", f"fp8 {sol['seconds_explore'] / (96 * 6) / forward:.2f}; "
         f"bf16 {record(g, 'bf16', compile='compiled')['forward_ms'] / policy:.2f}; "
         f"int8 {record(g, 'int8', compile='compiled')['forward_ms'] / policy:.2f}",
         "fp8: 96 explored x 6 steps; bf16, int8: SD3.5-M, batch 24", link("gpu/engine_sd35m_h200_reference_layers", results)],
        ["decoding and scoring, per image", f"{rest / 120 * 1000:.0f} ms", "the iteration less rollout and training, over "
         "120 images (tiny VAE, CNN reward)", link("gpu/sd35l_preset_h200", results)],
        ["training, per (sample, timestep) pair", f"{sol['seconds_train'] / 144 / forward:.1f} forwards", "24 samples x 6 "
         "timesteps, old and reference teachers, checkpointing", link("gpu/sd35l_preset_h200", results)],
        ["eager / compiled forward", f"{eager['seconds_rollout'] / compiled['seconds_rollout']:.2f}x", "naive_scaling's "
         "rollout, eager and compiled, the same call", link("gpu/sd35l_preset_h200", results)],
    ]
    return markdown(["ratio", "value", "from", "data"], rows)
