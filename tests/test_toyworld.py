import dataclasses
import math

import numpy as np
import pytest

from solrl.toyworld.grammar import COLORS, OPPOSITE_RELATION, PromptGrammarError, all_scenes, parse_prompt, split_prompts
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
    "position": lambda s: dataclasses.replace(s, relation=OPPOSITE_RELATION[s.relation]),
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


def test_shape_ious_equal_a_whole_image_computation():
    """The verifier measures IoU inside each object's box; drawn over the whole image it must agree."""
    from scipy import ndimage

    from solrl.toyworld.grammar import SHAPES

    rng = np.random.default_rng(3)
    scenes = [parse_prompt(p) for p in split_prompts("heldout")[:12]]
    checked = 0
    for scene in scenes:
        image = render_scene(scene, rng).astype(int)
        image = np.clip(image + rng.integers(-70, 70, image.shape), 0, 255).astype(np.uint8)  # ragged edges
        for obj in detect_objects(image):
            rgb = np.array(COLORS[obj.color])
            near = np.linalg.norm(image.astype(np.float32) - rgb, axis=-1) < 90
            components, n = ndimage.label(near)
            hit = [c for c in range(1, n + 1) if np.allclose(np.argwhere(components == c).mean(0), obj.center)]
            if len(hit) != 1:
                continue  # nearest-palette labelling can split pixels differently from this simple threshold
            mask = components == hit[0]
            rows, cols = np.nonzero(mask)
            top, left, h, w = rows.min(), cols.min(), np.ptp(rows) + 1, np.ptp(cols) + 1
            for shape in SHAPES:
                ideal = shape_mask(shape, 32, 32, top, left, h, w)
                assert obj.shape_iou[shape] == pytest.approx((ideal & mask).sum() / (ideal | mask).sum(), abs=1e-12)
            checked += 1
    assert checked >= 10


def test_verdict_parts_are_the_partial_credits_the_score_averages():
    rng = np.random.default_rng(1)
    scene = parse_prompt("a red circle to the left of a blue square")
    clean = verify(render_scene(scene, rng), scene)
    assert set(clean.parts) == {"shape_first", "shape_second", "relation", "purity"}
    assert clean.score == pytest.approx(np.mean(list(clean.parts.values())))
    assert min(clean.parts.values()) > 0.9
    blank = verify(np.full((32, 32, 3), 255, np.uint8), parse_prompt("three green squares"))
    assert blank.parts == {"count": 0.0, "shape": 0.0, "purity": 0.0}


def test_noise_specks_earn_little():
    rng = np.random.default_rng(0)
    noise = rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8)
    assert verify(noise, parse_prompt("a red circle above a blue square")).score < 0.3
    blank = np.full((32, 32, 3), 255, np.uint8)
    assert verify(blank, parse_prompt("two green triangles")).score == 0.0
    assert detect_objects(blank) == []


@pytest.mark.slow
def test_pretrain_writes_a_loadable_model_and_init_continues_from_one(tmp_path, capsys):
    import json

    import torch

    from solrl.cli import main
    from solrl.models.toy import ToyPolicy
    from solrl.toyworld.pretrain import PretrainConfig, pretrain_toy

    first = pretrain_toy(PretrainConfig(out=str(tmp_path / "first"), steps=2, batch_size=4, snapshot_every=0), log=lambda *a: None)
    info = json.loads((first / "training.json").read_text())
    assert info["step"] == 2 and info["config"]["init"] is None and math.isfinite(info["final_loss_mean_last_50"])
    start = ToyPolicy.from_pretrained(first).transformer.state_dict()
    # with lr 0 nothing moves, so continuing must give back the starting weights (a random start would not)
    again = pretrain_toy(PretrainConfig(out=str(tmp_path / "again"), steps=2, batch_size=4, lr=0.0, seed=5, snapshot_every=0,
                                        init=str(first)), log=lambda *a: None)
    for name, value in ToyPolicy.from_pretrained(again).transformer.state_dict().items():
        assert torch.equal(value, start[name]), name
    # the prompt-mean loss draws from its own generator: the same batches, with its term added to the loss
    plus = pretrain_toy(PretrainConfig(out=str(tmp_path / "plus"), steps=2, batch_size=4, lr=0.0, seed=5, snapshot_every=0,
                                       init=str(first), mean_weight=1.0, mean_renders=2), log=lambda *a: None)
    losses = [json.loads((d / "training.json").read_text())["final_loss_mean_last_50"] for d in (again, plus)]
    assert losses[1] > losses[0] and json.loads((plus / "training.json").read_text())["config"]["mean_weight"] == 1.0
    assert main(["pretrain-toy", "--init", str(tmp_path / "nowhere"), "--steps", "1", "--out", str(tmp_path / "x")]) == 2
    assert "no toy model there (config.json missing)" in capsys.readouterr().err


def test_pretrain_timestep_sampling_uniform_reaches_the_high_noise_logit_normal_skips():
    import pytest
    import torch

    from solrl.toyworld.pretrain import sample_timesteps

    torch.manual_seed(0)
    uniform, logit_normal = sample_timesteps("uniform", 100_000), sample_timesteps("logit_normal", 100_000)
    # P(t > 0.9): 0.1 uniform; 1 - Phi(logit(0.9) = 2.197) = 0.014 for SD3's logit-normal(0, 1)
    assert abs((uniform > 0.9).float().mean().item() - 0.1) < 0.005
    assert abs((logit_normal > 0.9).float().mean().item() - 0.014) < 0.002
    assert 0 < uniform.min() and uniform.max() < 1 and 0 < logit_normal.min() and logit_normal.max() < 1
    with pytest.raises(ValueError, match="use 'logit_normal' or 'uniform'"):
        sample_timesteps("cosine", 4)


def test_text_position_code_matches_the_formula_and_reaches_only_real_tokens():
    import torch

    from solrl.models.text_encoder import MiniLMEncoder, sinusoidal_positions

    code = sinusoidal_positions(5, 8)
    # channel pair k has frequency 10000^(-2k/8): position 3, pair 1 -> sin/cos(3 * 0.1)
    assert code[0].tolist() == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    assert torch.allclose(code[3, 2:4], torch.tensor([math.sin(0.3), math.cos(0.3)]), atol=1e-6)
    assert torch.allclose(code.norm(dim=1), torch.full((5,), 2.0), atol=1e-6)  # sqrt(8 / 2)

    prompts = ["a red circle to the left of a blue square", "two green triangles"]
    plain, shifted = MiniLMEncoder()(prompts), MiniLMEncoder(position_scale=0.5)(prompts)
    real = plain.states.abs().sum(-1) > 0
    full = 0.5 * sinusoidal_positions(plain.states.shape[1], plain.states.shape[2])
    assert torch.allclose((shifted.states - plain.states)[real], full.expand_as(plain.states)[real], atol=1e-5)
    assert (shifted.states[~real] == 0).all() and real.sum(1).tolist()[1] < real.shape[1]  # padding stays empty
    assert torch.equal(shifted.pooled, plain.pooled)


def test_causal_text_states_see_only_what_came_before():
    import torch

    from solrl.models.text_encoder import MiniLMEncoder

    prompts = ["a red circle to the left of a blue square", "a red circle to the left of a green square"]
    causal, full = MiniLMEncoder(causal=True)(prompts), MiniLMEncoder()(prompts)
    # tokens: [CLS] a red circle to the left of a | blue square [SEP]: the prompts differ from token 9 on.
    # Rows of one batch, same kernels: equal but for summation order (states of norm about 8)
    assert torch.allclose(causal.states[0, :9], causal.states[1, :9], atol=1e-4)
    assert (causal.states[0, 9] - causal.states[1, 9]).abs().max() > 0.1
    assert (full.states[0, :9] - full.states[1, :9]).abs().max() > 0.1  # bidirectional: every token sees the change
    # the object-swapped twin: the first colour token's state differs far more under the causal mask
    twin = ["a red circle to the left of a blue square", "a blue square to the left of a red circle"]
    cos = torch.nn.functional.cosine_similarity
    c, f = MiniLMEncoder(causal=True)(twin).states, MiniLMEncoder()(twin).states
    assert cos(c[0, 2], c[1, 9], dim=0) < cos(f[0, 2], f[1, 9], dim=0) - 0.05


def test_word_embeddings_keep_the_relation_words_apart():
    import torch

    from solrl.models.text_encoder import MiniLMEncoder

    pair = ["a red circle to the left of a blue square", "a red circle to the right of a blue square"]
    plain, words = MiniLMEncoder(), MiniLMEncoder(word_scale=5.0)
    table = words.model.embeddings.word_embeddings.weight
    ids = words.tokenizer(pair, padding="max_length", truncation=True, max_length=words.max_tokens, return_tensors="pt")["input_ids"]
    # exactly the states plus 5 x the input embedding of each token (padding stays zero)
    mask = (ids > 0).unsqueeze(-1).float()
    torch.testing.assert_close(words(pair).states, (plain(pair).states + 5.0 * table[ids]) * mask, atol=1e-5, rtol=1e-5)
    cos = torch.nn.functional.cosine_similarity
    p, w = plain(pair).states, words(pair).states
    assert ids[0, 6] != ids[1, 6]  # [CLS] a red circle to the | left / right
    assert cos(w[0, 6], w[1, 6], dim=0) < cos(p[0, 6], p[1, 6], dim=0) - 0.05  # the relation tokens move apart


def test_flow_matching_loss_is_the_per_sample_velocity_error_at_the_interpolated_point():
    import torch

    from solrl.toyworld.pretrain import flow_matching_loss

    class Recorder:  # a "policy" predicting velocity 1 everywhere, recording where it was asked
        def velocity(self, x, t, cond):
            self.x = x
            return torch.ones_like(x)

    x0, eps, t = torch.zeros(2, 1, 1, 2), torch.tensor([[[[2.0, 4.0]]], [[[1.0, 1.0]]]]), torch.tensor([0.5, 0.25])
    policy = Recorder()
    loss = flow_matching_loss(policy, x0, t, eps, cond=None)
    assert torch.equal(policy.x, torch.tensor([[[[1.0, 2.0]]], [[[0.25, 0.25]]]]))  # (1 - t) x0 + t eps
    assert torch.equal(loss, torch.tensor([((2 - 1) ** 2 + (4 - 1) ** 2) / 2, 0.0]))  # target eps - x0


def test_prompt_mean_loss_is_the_velocity_error_at_pure_noise_against_the_mean_latent():
    import torch

    from solrl.toyworld.pretrain import prompt_mean_loss

    class Recorder:  # a "policy" predicting velocity 1 everywhere, recording where and when it was asked
        def velocity(self, x, t, cond):
            self.x, self.t = x, t
            return torch.ones_like(x)

    means, eps = torch.tensor([[[[0.5, -1.0]]], [[[2.0, 0.0]]]]), torch.tensor([[[[2.0, 4.0]]], [[[1.0, 1.0]]]])
    policy = Recorder()
    loss = prompt_mean_loss(policy, means, eps, cond=None)
    assert torch.equal(policy.x, eps) and torch.equal(policy.t, torch.ones(2))  # t = 1: the input is the noise
    # target eps - mean: (1.5, 5) and (-1, 1); error against 1: (0.5, 4) and (-2, 0)
    assert torch.equal(loss, torch.tensor([(0.5 ** 2 + 4 ** 2) / 2, (2 ** 2 + 0) / 2]))


def test_prompt_means_average_the_renders_of_each_scene():
    import numpy as np
    import torch

    from solrl.toyworld.grammar import parse_prompt
    from solrl.toyworld.pretrain import prompt_means
    from solrl.toyworld.render import render_scene

    class Pixels:  # the pixel-space policy's encode: uint8 -> [-1, 1]
        def encode(self, images):
            return torch.as_tensor(images).permute(0, 3, 1, 2).float() / 127.5 - 1

    scenes = [parse_prompt("two red circles"), parse_prompt("a blue square above a green triangle")]
    means = prompt_means(Pixels(), scenes, 3, np.random.default_rng(0))
    rng = np.random.default_rng(0)
    for scene, mean in zip(scenes, means):
        renders = Pixels().encode(np.stack([render_scene(scene, rng) for _ in range(3)]))
        assert torch.allclose(mean, renders.mean(0)) and not torch.allclose(mean, renders[0])


def test_training_prompts_keep_counts_and_the_listed_relations():
    from solrl.toyworld.grammar import parse_prompt, split_prompts
    from solrl.toyworld.pretrain import training_prompts

    every = split_prompts("train")
    assert training_prompts() == every
    stage = training_prompts(("left of", "above"))
    kinds = {parse_prompt(p).relation for p in stage}
    assert kinds == {None, "left of", "above"}
    assert len(stage) == sum(parse_prompt(p).relation in (None, "left of", "above") for p in every) < len(every)
    with pytest.raises(ValueError, match="'beside'"):
        training_prompts(("left of", "beside"))


def test_pretrain_saves_the_text_settings_and_init_inherits_them(tmp_path):
    import json

    from solrl.models.toy import ToyPolicy
    from solrl.toyworld.pretrain import PretrainConfig, pretrain_toy

    first = pretrain_toy(PretrainConfig(out=str(tmp_path / "first"), steps=1, batch_size=2, snapshot_every=0,
                                        text_position_scale=0.5, text_causal=True, text_word_scale=3.0), log=lambda *a: None)
    info = json.loads((first / "training.json").read_text())
    assert (info["text_position_scale"], info["text_causal"], info["text_word_scale"]) == (0.5, True, 3.0)
    encoder = ToyPolicy.from_pretrained(first).text_encoder
    assert (encoder.position_scale, encoder.causal, encoder.word_scale) == (0.5, True, 3.0)
    again = pretrain_toy(PretrainConfig(out=str(tmp_path / "again"), steps=1, batch_size=2, snapshot_every=0,
                                        init=str(first)), log=lambda *a: None)
    encoder = ToyPolicy.from_pretrained(again).text_encoder
    assert (encoder.position_scale, encoder.causal, encoder.word_scale) == (0.5, True, 3.0)
    encoder = ToyPolicy.from_pretrained().text_encoder
    assert (encoder.position_scale, encoder.causal, encoder.word_scale) == (0.0, False, 0.0)  # the shipped base has none
