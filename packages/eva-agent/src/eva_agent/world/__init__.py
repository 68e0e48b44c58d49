"""ShapeTextVQA: generated scenes, questions with ground truth, the dataset."""

from eva_agent.world.dataset import ShapeTextVQA
from eva_agent.world.questions import answer_question, make_questions, parse_question
from eva_agent.world.scenes import label_box, render_scene, sample_scene, scene_of, shape_box

__all__ = [
    "ShapeTextVQA",
    "answer_question",
    "label_box",
    "make_questions",
    "parse_question",
    "render_scene",
    "sample_scene",
    "scene_of",
    "shape_box",
]
