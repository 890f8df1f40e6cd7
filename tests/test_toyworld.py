import dataclasses

import numpy as np
import pytest

from solrl.toyworld.grammar import (COLORS, PromptGrammarError, all_scenes, parse_prompt, split_prompts)
from solrl.toyworld.render import render_scene, shape_mask
from solrl.toyworld.verifier import detect_objects, verify


def test_every_prompt_parses_back_to_its_scene():
    for scene in all_scenes():
        assert parse_prompt(scene.prompt()) == scene


def test_splits_are_disjoint_and_held_out_combinations_are_unseen():
    train, held = split_prompts("train"), split_prompts("heldout")
    assert not set(train) & set(held)
    assert len(held) >= 40 and len(train) > 4 * len(held)

    def pair(p):
        s = parse_prompt(p)
        return frozenset([s.first, s.second]) if s.second else (s.first, s.count)

    assert not {pair(p) for p in train} & {pair(p) for p in held}
    kinds = {parse_prompt(p).kind for p in held}
    assert kinds == {"count", "relation"}


@pytest.mark.parametrize("bad", ["a photo of a cat", "two red circle", "one red circles", "a red circle above a red square",
                                 "five blue squares", ""])
def test_prompts_outside_the_grammar_are_refused(bad):
    with pytest.raises(PromptGrammarError, match="prompt"):
        parse_prompt(bad)


def test_shape_masks_match_hand_counts():
    # A 4x4 box at (0, 0) in a 4x4 image: the square fills 16 pixels; the circle of radius 2
    # contains the 12 pixel centres with (x-2)^2 + (y-2)^2 <= 4 (all but the corners); the apex-up
    # triangle keeps |x - 2| <= y / 2 at centres y = 0.5, 1.5, 2.5, 3.5: 0 + 2 + 2 + 4 = 8.
    assert shape_mask("square", 4, 4, 0, 0, 4, 4).sum() == 16
    assert shape_mask("circle", 4, 4, 0, 0, 4, 4).sum() == 12
    assert shape_mask("triangle", 4, 4, 0, 0, 4, 4).sum() == 8


def test_verifier_scores_ground_truth_held_out_scenes_near_one():
    rng = np.random.default_rng(123)
    scenes = [parse_prompt(p) for p in split_prompts("heldout")]
    verdicts = [verify(render_scene(s, rng), s) for s in scenes for _ in range(2)]
    scores = np.array([v.score for v in verdicts])
    assert scores.mean() >= 0.95
    assert np.mean([v.strict for v in verdicts]) >= 0.95


def _other_color(c):
    return next(k for k in COLORS if k != c)


def _other_shape(s):
    return {"circle": "square", "square": "triangle", "triangle": "circle"}[s]


VIOLATIONS = {
    "colour": lambda s: dataclasses.replace(s, first=dataclasses.replace(s.first, color=_other_color(s.first.color)))
    if s.second is None else dataclasses.replace(s, first=dataclasses.replace(
        s.first, color=next(c for c in COLORS if c not in (s.first.color, s.second.color)))),
    "shape": lambda s: dataclasses.replace(s, first=dataclasses.replace(s.first, shape=_other_shape(s.first.shape))),
    "position": lambda s: dataclasses.replace(s, relation={"left of": "right of", "right of": "left of",
                                                           "above": "below", "below": "above"}[s.relation]),
    "count": lambda s: dataclasses.replace(s, count=s.count % 4 + 1),
}


@pytest.mark.parametrize("violation", list(VIOLATIONS))
def test_verifier_scores_violating_scenes_clearly_lower(violation):
    rng = np.random.default_rng(7)
    kind = "count" if violation == "count" else "relation"
    scenes = [parse_prompt(p) for p in split_prompts("heldout")]
    scenes = [s for s in scenes if s.kind == kind or (violation in ("colour", "shape") and s.kind == "count")]
    truth, wrong = [], []
    for s in scenes[:40]:
        truth.append(verify(render_scene(s, rng), s).score)
        verdict = verify(render_scene(VIOLATIONS[violation](s), rng), s)
        wrong.append(verdict.score)
        assert not verdict.strict, (violation, s.prompt())
    assert np.mean(truth) - np.mean(wrong) >= 0.2, (violation, np.mean(truth), np.mean(wrong))
    if violation == "colour":
        assert np.mean(wrong) <= 0.35


def test_noise_specks_earn_little():
    rng = np.random.default_rng(0)
    noise = rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8)
    assert verify(noise, parse_prompt("a red circle above a blue square")).score < 0.3
    blank = np.full((32, 32, 3), 255, np.uint8)
    assert verify(blank, parse_prompt("two green triangles")).score == 0.0
    assert detect_objects(blank) == []
