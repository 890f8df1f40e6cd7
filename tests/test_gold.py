"""The gold check against an adversarial set: ground-truth renders pass, degenerate images never do.

Degenerate kinds, each drawn for every held-out prompt: one giant object of the asked colour and
shape, a canvas filled with the asked colour, a staircase block of it (the shape collapsed runs
paint), palette noise, stripes, a blank canvas, and the asked objects at a quarter of the world's
size. The training reward (verifier.py) pays some of these well (a giant object about 0.5); the gold
check must give none of them a pass, while >= 95% of ground-truth renders pass."""
import numpy as np
import pytest

from solrl.data import load_prompts
from solrl.toyworld.gold import gold_check, world_likeness
from solrl.toyworld.grammar import BACKGROUND, COLORS, parse_prompt
from solrl.toyworld.render import IMAGE_SIZE, blank_canvas, render_scene, shape_mask
from solrl.toyworld.verifier import verify

PROMPTS = load_prompts("heldout")


def giant(scene, rng):
    image = blank_canvas()
    image[shape_mask(scene.first.shape, IMAGE_SIZE, IMAGE_SIZE, 2, 2, 28, 28)] = COLORS[scene.first.color]
    return image


def filled(scene, rng):
    image = blank_canvas()
    image[:] = COLORS[scene.first.color]
    return image


def staircase(scene, rng):
    image = blank_canvas()
    for row in range(4, IMAGE_SIZE):
        image[row, : 8 + (row // 6) * 5] = COLORS[scene.first.color]
    return image


def noise(scene, rng):
    palette = np.array([BACKGROUND, *COLORS.values()], np.uint8)
    return palette[rng.integers(0, len(palette), size=(IMAGE_SIZE, IMAGE_SIZE))]


def stripes(scene, rng):
    image = blank_canvas()
    for row in range(0, IMAGE_SIZE, 8):
        image[row:row + 4] = COLORS[scene.first.color]
    return image


def blank(scene, rng):
    return blank_canvas()


def tiny_objects(scene, rng):
    """The asked objects, placed as the world places them, at a quarter of their size."""
    image = blank_canvas()
    objects = [scene.first] * scene.count if scene.second is None else [scene.first, scene.second]
    horizontal = scene.relation in ("left of", "right of")
    first_before = scene.relation in ("left of", "above")
    for i, spec in enumerate(objects):
        k = i if (scene.second is None or first_before) else 1 - i
        top, left = (14, 4 + 7 * k) if (scene.second is None or horizontal) else (4 + 7 * k, 14)
        image[shape_mask(spec.shape, IMAGE_SIZE, IMAGE_SIZE, top, left, 3, 3)] = COLORS[spec.color]
    return image


KINDS = [giant, filled, staircase, noise, stripes, blank, tiny_objects]


def test_ground_truth_renders_pass():
    rng = np.random.default_rng(0)
    results = [gold_check(render_scene(parse_prompt(p), rng), parse_prompt(p)).correct for p in PROMPTS for _ in range(3)]
    assert np.mean(results) >= 0.95
    rng = np.random.default_rng(1)
    assert all(world_likeness(render_scene(parse_prompt(p), rng)) for p in PROMPTS[:30])


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_no_degenerate_image_passes(kind):
    rng = np.random.default_rng(2)
    passed = [p for p in PROMPTS if gold_check(kind(parse_prompt(p), rng), parse_prompt(p)).correct]
    assert not passed, passed[:3]
    assert not any(world_likeness(kind(parse_prompt(p), rng)) for p in PROMPTS[:20])


def test_the_training_reward_is_gamed_where_the_gold_check_is_not():
    """Why the gold metric exists (issue 17): the training reward pays a giant object more than half a
    ground-truth render's score on average; the gold check fails it every time."""
    rng = np.random.default_rng(3)
    truth = np.mean([verify(render_scene(parse_prompt(p), rng), parse_prompt(p)).score for p in PROMPTS])
    gamed = np.mean([verify(giant(parse_prompt(p), rng), parse_prompt(p)).score for p in PROMPTS])
    assert truth > 0.9 and gamed > truth / 2


def test_the_gold_score_pays_degenerate_images_under_half_of_ground_truth():
    """Issue 17's adversarial target for a training reward: every degenerate kind's mean score below
    half the ground truth's, while ground truth keeps >= 0.95."""
    from solrl.toyworld.gold import gold_score

    rng = np.random.default_rng(4)
    truth = np.mean([gold_score(render_scene(parse_prompt(p), rng), parse_prompt(p))[0] for p in PROMPTS])
    assert truth >= 0.95
    for kind in KINDS:
        mean = np.mean([gold_score(kind(parse_prompt(p), rng), parse_prompt(p))[0] for p in PROMPTS])
        assert mean < truth / 2, (kind.__name__, mean)


@pytest.mark.parametrize("run", ["naive_quant_nvfp4_18it", "naive_quant_fp32_6step_18it"])
def test_real_collapsed_samples_fail_the_gold_check(run):
    """Held-out samples (89 prompts, one seed) saved from two collapsed runs of 2026-11-30
    (docs/reference-alignment.md): textured blobs and smeared blocks whose training reward had risen
    (0.348 -> 0.428) or fallen (-> 0.176)."""
    from pathlib import Path

    from solrl.toyworld.gold import gold_score

    saved = np.load(Path(__file__).parent / "data" / "collapsed_samples.npz")
    prompts, images = [str(p) for p in saved["prompts"]], saved[run]
    assert len(prompts) == len(images) == len(PROMPTS)
    assert not any(gold_check(img, parse_prompt(p)).correct for img, p in zip(images, prompts))
    assert np.mean([gold_score(img, parse_prompt(p))[0] for img, p in zip(images, prompts)]) < 0.5


@pytest.mark.parametrize("preset", ["toy_nft", "toy_diffusionnft", "toy_naive_scaling", "toy_naive_quant", "toy_sol_rl"])
def test_the_toy_presets_train_on_a_reward_that_meets_the_adversarial_bar(preset):
    """Issue 17's bar, asked of the reward each toy preset trains on (built as the trainer builds it):
    ground truth >= 0.95, every degenerate kind's mean under half of it, no degenerate image strict-correct."""
    from solrl.config import load_config
    from solrl.rewards import build_reward

    config = load_config(f"configs/{preset}.yaml", [])
    reward = build_reward(config.reward.name, **config.reward.options)
    rng = np.random.default_rng(6)
    scenes = [parse_prompt(p) for p in PROMPTS]
    truth = reward(np.stack([render_scene(s, rng) for s in scenes]), PROMPTS)
    assert truth.scores.mean() >= 0.95
    for kind in KINDS:
        result = reward(np.stack([kind(s, rng) for s in scenes]), PROMPTS)
        assert result.scores.mean() < truth.scores.mean() / 2, (kind.__name__, float(result.scores.mean()))
        assert result.parts["strict"].sum() == 0, kind.__name__
