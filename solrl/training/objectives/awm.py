"""Advantage Weighted Matching on clean samples of any rollout family (the loss is algorithms/awm.py)."""
from __future__ import annotations

from ...algorithms.awm import awm_loss
from .base import OBJECTIVES, CleanSampleObjective


@OBJECTIVES.register("awm")
class AWMObjective(CleanSampleObjective):
    def teachers(self, cfg):
        return cfg.awm.old_kl_coef > 0, cfg.awm.ref_kl_coef > 0, False

    def loss(self, cfg, c, v_theta, v_old, v_ref, advantages):
        return awm_loss(v_theta, c.x0, c.eps, c.t, advantages[c.idx].to(c.t.device), cfg.adv_clip_max,
                        cfg.awm.weighting, v_old, cfg.awm.old_kl_coef, v_ref, cfg.awm.ref_kl_coef)
