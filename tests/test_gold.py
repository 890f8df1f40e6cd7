"""The gold check against an adversarial set: ground-truth renders and benign changes of them pass,
degenerate images never do.

Degenerate kinds, each drawn for every held-out prompt it applies to: one giant object of the asked colour
and shape, a canvas filled with the asked colour, a staircase block of it (the shape collapsed runs
paint), palette noise, stripes, a blank canvas, the asked objects at a quarter of the world's size; since
2026-12-03 two objects side by side across the asked axis, a background tinted grey or pink or noisy,
objects with a quarter of their pixels punched out, one object too many; since 2026-12-07 an object in a
colour between two of the world's, and two objects fused into one blob. `geneval` (verifier.py) pays
some of these well (a giant object about 0.5); the gold check must give none of them a pass, while >= 95%
of ground-truth renders pass. This set is held out from the referee (referee.py): it tests it too."""
import json
from pathlib import Path

import numpy as np
import pytest
from scipy import ndimage

from solrl.data import load_prompts
from solrl.images import jpeg_round_trip, with_pixel_noise
from solrl.toyworld.gold import gold_check, world_likeness
from solrl.toyworld.grammar import BACKGROUND, COLORS, parse_prompt
from solrl.toyworld.render import IMAGE_SIZE, Placed, blank_canvas, layout_scene, render_layout, render_scene, shape_mask
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


def side_by_side(scene, rng):
    """Relation scenes: the two objects side by side across the asked axis, the first shifted 3 px to the
    asked side: a person reads them as "beside". Count scenes: None (not this kind)."""
    if scene.second is None:
        return None
    horizontal = scene.relation in ("left of", "right of")
    sign = 1 if scene.relation in ("left of", "above") else -1   # the first object has the smaller coordinate
    size = 12
    along = (16 - size / 2) - sign * 1.5, (16 - size / 2) + sign * 1.5
    across = 3, 17
    placed = []
    for spec, a, c in zip((scene.first, scene.second), along, across):
        top, left = (c, a) if horizontal else (a, c)
        placed.append(Placed(spec, top, left, size))
    return render_layout(placed)


def _background(image):
    return (image == 255).all(-1)


def tinted_grey(scene, rng):
    image = render_scene(scene, rng)
    image[_background(image)] = (225, 225, 225)
    return image


def tinted_pink(scene, rng):
    image = render_scene(scene, rng)
    image[_background(image)] = (255, 215, 225)
    return image


def noisy_background(scene, rng):
    image = render_scene(scene, rng).astype(float)
    background = _background(image)
    image[background] += rng.normal(0, 20, (background.sum(), 3))
    return np.clip(image, 0, 255).astype(np.uint8)


def punched_out(scene, rng):
    """The asked objects with a quarter of their pixels punched out (white)."""
    image = render_scene(scene, rng)
    objects = ~_background(image)
    image[objects & (rng.random(objects.shape) < 0.25)] = BACKGROUND
    return image


def one_too_many(scene, rng):
    """The asked scene and one more object of the first asked kind."""
    for _ in range(200):
        placed = layout_scene(scene, rng)
        size = int(rng.integers(8, 11))
        extra = Placed(scene.first, int(rng.integers(1, IMAGE_SIZE - size)), int(rng.integers(1, IMAGE_SIZE - size)), size)
        image = render_layout(placed)
        if not (~_background(render_layout([extra])) & ~_background(image)).any():   # no overlap: a separate object
            return render_layout([*placed, extra])
    raise RuntimeError("no room for an extra object")


def in_between_colour(scene, rng):
    """The asked scene with its first object painted between its colour and another of the world's, 35-65% of
    the way: orange for red and yellow, teal for green and blue; a person names neither colour."""
    placed = layout_scene(scene, rng)
    other = rng.choice([c for c in COLORS if c != scene.first.color])
    t = rng.uniform(0.35, 0.65)
    mix = tuple((1 - t) * np.array(COLORS[scene.first.color]) + t * np.array(COLORS[other]))
    image = render_layout(placed[1:])
    first = placed[0]
    image[shape_mask(first.spec.shape, IMAGE_SIZE, IMAGE_SIZE, first.top, first.left, first.size, first.size)] = np.round(mix)
    return image


def _touch(a, b):
    """Whether two boolean masks overlap or meet side to side."""
    return bool((ndimage.binary_dilation(a, structure=ndimage.generate_binary_structure(2, 1)) & b).any())


def fused(scene, rng):
    """Two of the asked objects (the relation's pair, or two of a count) slid together until they touch, then
    0-2 px further into each other: one blob. Count scenes of one object: None (not this kind)."""
    if scene.second is None and scene.count == 1:
        return None
    placed = layout_scene(scene, rng)
    a, b = placed[0], placed[1]
    masks = lambda p: shape_mask(p.spec.shape, IMAGE_SIZE, IMAGE_SIZE, p.top, p.left, p.size, p.size)  # noqa: E731
    dy, dx = (a.top + a.size / 2) - (b.top + b.size / 2), (a.left + a.size / 2) - (b.left + b.size / 2)
    step = 0.5 / max(abs(dy), abs(dx))
    for k in range(1, int(2 / step) + 1):
        moved = Placed(b.spec, b.top + k * step * dy, b.left + k * step * dx, b.size)
        if _touch(masks(a), masks(moved)):
            extra = rng.uniform(0, 2) * step * 2
            moved = Placed(b.spec, moved.top + extra * dy, moved.left + extra * dx, b.size)
            return render_layout([a, *placed[2:], moved])   # the moved object drawn last, over the other
    raise RuntimeError("the objects never met")


# the held-out adversarial set: the scoring rules are tested on it, and the referee never sees it
KINDS = [giant, filled, staircase, noise, stripes, blank, tiny_objects, side_by_side, tinted_grey, tinted_pink,
         noisy_background, punched_out, one_too_many, in_between_colour, fused]


# the means measured on 2026-12-07 with the blob rules (seed 4, 89 held-out prompts; side_by_side on the 80
# relation prompts, fused on the 88 with two objects or more)
MEASURED_GOLD_SCORE = {"giant": 0.0, "filled": 0.0, "staircase": 0.0, "noise": 0.0, "stripes": 0.0, "blank": 0.0,
                       "tiny_objects": 0.0, "side_by_side": 0.0, "tinted_grey": 0.0, "tinted_pink": 0.0,
                       "noisy_background": 0.0, "punched_out": 0.152, "one_too_many": 0.291,
                       "in_between_colour": 0.228, "fused": 0.006}


def antialiased(layout, rng):
    return render_layout(layout, supersample=4)


def shifted(layout, rng):
    """The whole render one pixel to the right."""
    image, out = render_layout(layout), blank_canvas()
    out[:, 1:] = image[:, :-1]
    return out


def colour_jitter(layout, rng):
    """Every pixel's channels moved by up to 3 units."""
    return np.clip(render_layout(layout).astype(int) + rng.integers(-3, 4, (IMAGE_SIZE, IMAGE_SIZE, 3)), 0, 255).astype(np.uint8)


BENIGN = [antialiased, shifted, colour_jitter]

LIGHT_NOISE_STD = 4.0   # per channel, of 255: the canvas stays visibly white (largest step 3 sigma = 12)
JPEG_QUALITY = 75       # PIL's default quality, with its default 4:2:0 chroma subsampling


def jpeg_75(layout, rng):
    """The render through lossy JPEG compression at quality 75 and back."""
    return jpeg_round_trip(render_layout(layout), JPEG_QUALITY)


def light_noise(layout, rng):
    """Sensor-like Gaussian noise on every pixel."""
    return with_pixel_noise(render_layout(layout), LIGHT_NOISE_STD, rng)


# copies of a render a person calls the same image, which the rewards and the referee must keep >= 0.9 of
LOSSY = [jpeg_75, light_noise]


def kind_images(kind, prompts, rng):
    """(prompts, images) of a kind over the prompts it applies to."""
    pairs = [(p, kind(parse_prompt(p), rng)) for p in prompts]
    return [p for p, image in pairs if image is not None], [image for _, image in pairs if image is not None]


def test_ground_truth_renders_pass():
    rng = np.random.default_rng(0)
    results = [gold_check(render_scene(parse_prompt(p), rng), parse_prompt(p)).correct for p in PROMPTS for _ in range(3)]
    assert np.mean(results) >= 0.95
    rng = np.random.default_rng(1)
    assert all(world_likeness(render_scene(parse_prompt(p), rng)) for p in PROMPTS[:30])


@pytest.mark.parametrize("change", BENIGN, ids=lambda k: k.__name__)
def test_benign_changes_of_renders_keep_their_reward_and_pass(change):
    """Anti-aliased edges, a one-pixel shift and colour jitter of a few units keep >= 0.85 of a
    render's reward on average and pass the gold check (measured: 1.000 passed, mean score 0.998-0.999)."""
    from solrl.toyworld.gold import gold_score

    rng = np.random.default_rng(5)
    scenes = [parse_prompt(p) for p in PROMPTS]
    layouts = [layout_scene(s, rng) for s in scenes]
    truth = [gold_score(render_layout(layout), s)[0] for layout, s in zip(layouts, scenes)]
    images = [change(layout, rng) for layout in layouts]
    kept = [gold_score(image, s)[0] for image, s in zip(images, scenes)]
    assert np.mean(kept) >= 0.85 * np.mean(truth)
    assert np.mean([gold_check(image, s).correct for image, s in zip(images, scenes)]) >= 0.95


@pytest.mark.parametrize("change", LOSSY, ids=lambda k: k.__name__)
def test_lossy_copies_of_renders_keep_their_reward_and_pass(change):
    """JPEG at quality 75 and light pixel noise keep >= 0.9 of the renders' mean `geneval_gold` score and pass
    >= 90% of the time (measured 2026-12-07: quality 75 keeps 0.974 of 0.999 and passes 98.0% of 356 renders;
    before the blob rules 0.800 and 75.3%, the compression's bled colour splitting triangles' apexes off)."""
    from solrl.toyworld.gold import gold_score

    rng = np.random.default_rng(16)
    scenes = [parse_prompt(p) for p in PROMPTS]
    layouts = [layout_scene(s, rng) for s in scenes]
    truth = np.mean([gold_score(render_layout(layout), s)[0] for layout, s in zip(layouts, scenes)])
    images = [change(layout, rng) for layout in layouts]
    assert np.mean([gold_score(image, s)[0] for image, s in zip(images, scenes)]) >= 0.9 * truth
    assert np.mean([gold_check(image, s).correct for image, s in zip(images, scenes)]) >= 0.9


def test_a_colour_between_two_of_the_worlds_is_none_of_them():
    """One red square painted 0-100% of the way to yellow: the check names the colour while it is within 45
    of red (the mix at 25% is 40 from it) and refuses it from 35% (56 from red; at 50%, orange, 80 from both);
    from 75% the square reads as yellow (40 from it), a colour not asked for."""
    scene = parse_prompt("one red square")
    red, yellow = np.array(COLORS["red"], float), np.array(COLORS["yellow"], float)
    verdicts = {}
    for t in (0.0, 0.25, 0.35, 0.5, 0.65, 0.75):
        image = blank_canvas()
        image[10:20, 10:20] = np.round((1 - t) * red + t * yellow)
        verdicts[t] = gold_check(image, scene)
    assert verdicts[0.0].correct and verdicts[0.25].correct
    for t in (0.35, 0.5, 0.65):
        assert not verdicts[t].correct and "no colour of the world" in verdicts[t].reason, (t, verdicts[t].reason)
    assert "colours not asked for" in verdicts[0.75].reason


def test_fused_objects_are_one_object():
    """A red square of 10 px and a blue one of 8 px, 2 px apart (the world's gap), are two objects; moved to
    touch, they are one red blob fused with the blue square's 64 px; two touching red squares are one red
    object where two were asked."""
    from solrl.toyworld.gold import blobs

    def pair(gap, colours):
        image = blank_canvas()
        image[11:21, 4:14] = COLORS[colours[0]]
        image[12:20, 14 + gap:22 + gap] = COLORS[colours[1]]
        return image

    relation = parse_prompt("a red square to the left of a blue square")
    assert gold_check(pair(2, ("red", "blue")), relation).correct and len(blobs(pair(2, ("red", "blue")))) == 2
    (fused_blob,) = blobs(pair(0, ("red", "blue")))
    assert (fused_blob.obj.color, fused_blob.foreign) == ("red", 64)
    assert "fused with 64 px" in gold_check(pair(0, ("red", "blue")), relation).reason
    two = parse_prompt("two red squares")
    assert gold_check(pair(2, ("red", "red")), two).correct
    assert "1 red object(s), asked 2" in gold_check(pair(0, ("red", "red")), two).reason


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_no_degenerate_image_passes(kind):
    rng = np.random.default_rng(2)
    prompts, images = kind_images(kind, PROMPTS, rng)
    passed = [p for p, image in zip(prompts, images) if gold_check(image, parse_prompt(p)).correct]
    assert prompts and not passed, passed[:3]
    if kind not in (side_by_side, one_too_many):   # well-formed objects on a clean canvas: the world's look, wrong scene
        assert not any(world_likeness(image) for image in images[:20])


def test_the_training_reward_is_gamed_where_the_gold_check_is_not():
    """Why the gold metric exists: the training reward pays a giant object more than half a
    ground-truth render's score on average; the gold check fails it every time."""
    rng = np.random.default_rng(3)
    truth = np.mean([verify(render_scene(parse_prompt(p), rng), parse_prompt(p)).score for p in PROMPTS])
    gamed = np.mean([verify(giant(parse_prompt(p), rng), parse_prompt(p)).score for p in PROMPTS])
    assert truth > 0.9 and gamed > truth / 2


def test_the_gold_score_pays_degenerate_images_under_half_of_ground_truth():
    """The adversarial target for a training reward: every degenerate kind's mean score below half the
    ground truth's, while ground truth keeps >= 0.95."""
    from solrl.toyworld.gold import gold_score

    rng = np.random.default_rng(4)
    truth = np.mean([gold_score(render_scene(parse_prompt(p), rng), parse_prompt(p))[0] for p in PROMPTS])
    assert truth >= 0.95
    for kind in KINDS:
        prompts, images = kind_images(kind, PROMPTS, rng)
        mean = np.mean([gold_score(image, parse_prompt(p))[0] for p, image in zip(prompts, images)])
        assert mean < truth / 2, (kind.__name__, mean)
        # the bar above is the target; this one is nearer: the measured means, so a regression shows
        assert mean <= MEASURED_GOLD_SCORE[kind.__name__] + 0.05, (kind.__name__, mean)


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


CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def _toy_preset_rewards() -> dict[str, tuple[str, dict]]:
    """Each distinct reward the toy presets train on (name and options), keyed by the presets that use it."""
    from solrl.config import load_config

    by_reward: dict[str, list[str]] = {}
    for path in sorted(CONFIGS.glob("toy_*.yaml")):
        reward = load_config(str(path), []).reward
        preset = path.stem
        by_reward.setdefault(json.dumps([reward.name, reward.options], sort_keys=True), []).append(preset)
    return {"+".join(presets): tuple(json.loads(key)) for key, presets in by_reward.items()}


TOY_PRESET_REWARDS = _toy_preset_rewards()


def test_the_toy_presets_are_all_asked_the_adversarial_bar():
    assert sum(len(key.split("+")) for key in TOY_PRESET_REWARDS) == len(list(CONFIGS.glob("toy_*.yaml"))) >= 5


# one case per distinct reward: the presets that share one are asked the bar once
@pytest.mark.parametrize("presets", list(TOY_PRESET_REWARDS))
def test_the_toy_presets_train_on_a_reward_that_meets_the_adversarial_bar(presets):
    """The adversarial bar, asked of the reward each toy preset trains on (built as the trainer builds it):
    ground truth >= 0.95, every degenerate kind's mean under half of it, no degenerate image strict-correct."""
    from solrl.rewards import build_reward

    name, options = TOY_PRESET_REWARDS[presets]
    reward = build_reward(name, **options)
    rng = np.random.default_rng(6)
    scenes = [parse_prompt(p) for p in PROMPTS]
    truth = reward(np.stack([render_scene(s, rng) for s in scenes]), PROMPTS)
    assert truth.scores.mean() >= 0.95
    for kind in KINDS:
        prompts, images = kind_images(kind, PROMPTS, rng)
        result = reward(np.stack(images), prompts)
        assert result.scores.mean() < truth.scores.mean() / 2, (kind.__name__, float(result.scores.mean()))
        assert result.parts["strict"].sum() == 0, kind.__name__
