"""The scene reader (solrl/toyworld/reader.py): its classes, the shipped weights on renders and on the
adversarial set of tests/test_gold.py, which it never saw in training."""
import numpy as np
import pytest
import torch

from solrl.images import to_float_nchw
from solrl.toyworld.grammar import all_scenes, parse_prompt
from solrl.toyworld.reader import OFF_WORLD, SceneReader, canonical, class_names, class_of, reader_correct
from solrl.toyworld.render import render_scene
from test_gold import KINDS, PROMPTS


def test_mirror_relations_share_a_class_and_every_other_scene_has_its_own():
    assert class_of("a red circle to the right of a blue square") == class_of("a blue square to the left of a red circle")
    assert class_of("a red circle below a blue square") == class_of("a blue square above a red circle")
    assert class_of("a red circle to the left of a blue square") != class_of("a blue square to the left of a red circle")
    assert canonical(parse_prompt("a red circle below a blue square")).prompt() == "a blue square above a red circle"
    # 12 objects x 4 counts, and 12 x 9 ordered pairs of different colours x 4 relations, halved by mirroring
    assert len(class_names()) == 48 + 12 * 9 * 4 // 2 + 1 and class_names()[-1] == OFF_WORLD
    assert len({class_of(s) for s in all_scenes()}) == len(class_names()) - 1


def test_the_shipped_reader_reads_renders():
    rng = np.random.default_rng(0)
    prompts = PROMPTS * 2
    images = to_float_nchw(np.stack([render_scene(parse_prompt(p), rng) for p in prompts]))
    assert reader_correct(images, prompts).mean() >= 0.95


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_the_shipped_reader_reads_no_degenerate_image_as_its_prompt(kind):
    """The kinds were never shown to the reader (its off-world images come from pretrain_reader.py's own code)."""
    rng = np.random.default_rng(2)
    images = to_float_nchw(np.stack([kind(parse_prompt(p), rng) for p in PROMPTS]))
    assert reader_correct(images, PROMPTS).mean() <= 0.05


def test_a_missing_or_mismatched_reader_says_how_to_make_one(tmp_path):
    with pytest.raises(FileNotFoundError, match="pretrain-toy-reader"):
        SceneReader.load(tmp_path / "nowhere")
    SceneReader(width=4).save(tmp_path / "r")
    config = (tmp_path / "r" / "config.json").read_text().replace('"off-world"', '"off world"')
    (tmp_path / "r" / "config.json").write_text(config)
    with pytest.raises(ValueError, match="another grammar"):
        SceneReader.load(tmp_path / "r")


def _reader_saying(*held: str) -> SceneReader:
    """A reader whose answer ignores the image: exactly the descriptions `held` hold."""
    reader = SceneReader(width=4)
    with torch.no_grad():
        last = reader.net[-1]
        last.weight.zero_()
        last.bias.fill_(-5.0)
        for name in held:
            last.bias[class_names().index(name)] = 5.0
    return reader


def test_reader_correct_asks_whether_the_prompts_description_holds_and_the_image_is_in_the_world():
    images = torch.zeros(3, 3, 32, 32)
    prompts = ["two red circles", "one red circle", "a green square below a red circle"]
    reader = _reader_saying("two red circles", "a red circle above a green square")
    assert reader_correct(images, prompts, reader).tolist() == [1.0, 0.0, 1.0]
    off = _reader_saying("two red circles", "a red circle above a green square", OFF_WORLD)
    assert reader_correct(images, prompts, off).tolist() == [0.0, 0.0, 0.0]


def test_a_diagonal_render_holds_both_of_its_relations():
    """Training targets: red circle centred at (8, 8), green square at (20, 24): the circle is left of and
    above the square (offsets 16 and 12 px), neither right of nor below it."""
    from solrl.toyworld.grammar import COLORS, ObjectSpec, Scene
    from solrl.toyworld.pretrain_reader import true_classes

    image = np.full((32, 32, 3), 255, np.uint8)
    image[4:13, 4:13] = COLORS["red"]
    image[16:25, 20:29] = COLORS["green"]
    red, green = ObjectSpec("red", "circle"), ObjectSpec("green", "square")
    held = true_classes(Scene(red, relation="left of", second=green), image)
    assert sorted(held) == sorted([class_of("a red circle to the left of a green square"), class_of("a red circle above a green square")])
    assert true_classes(Scene(red, count=3), image) == [class_of("three red circles")]
