"""DiffusionNFT on clean ODE samples (SPEC.md section 1; the loss is algorithms/nft.py)."""
from __future__ import annotations

from ...algorithms.nft import nft_loss, reward_prob
from .base import OBJECTIVES, CleanSampleObjective


@OBJECTIVES.register("nft")
class NFTObjective(CleanSampleObjective):
    def teachers(self, cfg):
        return True, cfg.nft.ref_kl_coef > 0, cfg.nft.batch_old_ref

    def loss(self, cfg, c, v_theta, v_old, v_ref, advantages):
        r = reward_prob(advantages[c.idx], cfg.adv_clip_max, cfg.nft.adv_mode).to(c.t.device)
        return nft_loss(v_theta.float(), v_old.float(), c.x0, c.xt, c.t, r, cfg.nft.beta, cfg.adv_clip_max,
                        cfg.nft.adaptive_weight, None if v_ref is None else v_ref.float(), cfg.nft.ref_kl_coef)
