"""Diffusers text-to-image pipelines seen as solrl policies (SPEC.md notation, Policy protocol).

The pipeline object is kept whole: prompts go through its own `encode_prompt` (so templates,
truncation and text-encoder layers are exactly the pipeline's), and the VAE decodes as the
pipeline does. What solrl changes is the loop: the sample space is the *unpacked*, scaled VAE
latent [C, H, W] (what the pipeline's scheduler integrates, before any 2x2 token packing), and
`velocity(x, t, cond)` takes flow time t in [0, 1] and does the packing and the model's timestep
convention internally. Each family (diffusers_families.py) fills in those few model-specific steps.

Sampling grid. `sigmas(N)` is the grid the family's own pipeline integrates over: its scheduler's
`set_timesteps` through diffusers' `retrieve_timesteps`, with the pipeline's arguments (FLUX.1 and
Qwen-Image pass linspace(1, 1/N, N) and a resolution-dependent mu; SD3.5 and SANA let the scheduler
space its timesteps from sigma_max to sigma_min, then 0). Dynamic shifting and `shift_terminal`
therefore come from diffusers itself. An explicit `model.shift` replaces it with the plain grid
shift(linspace(1, 0, N + 1)) (e.g. shift 1 for the Sol-RL reference's SANA grid, docs/diffusers-policies.md).
`self.shift` stays the static shift equivalent at this resolution (dynamic shifting at one image size
is the static shift exp(mu)), for logs and for the SDE coefficient formulas that need one number.
"""
from __future__ import annotations

import collections
import contextlib
import logging
import math
from pathlib import Path

import torch

from ..devices import torch_dtype
from ..rollout.sampling import timesteps
from .base import PromptEmbeds

log = logging.getLogger("solrl.models")

def pack_2x2(x: torch.Tensor) -> torch.Tensor:
    """[B, C, H, W] -> [B, (H/2)(W/2), 4C]: FLUX / Qwen-Image tokens, channel-major inside each 2x2 patch."""
    b, c, h, w = x.shape
    return x.view(b, c, h // 2, 2, w // 2, 2).permute(0, 2, 4, 1, 3, 5).reshape(b, (h // 2) * (w // 2), c * 4)


def unpack_2x2(tokens: torch.Tensor, c: int, h: int, w: int) -> torch.Tensor:
    b = tokens.shape[0]
    return tokens.view(b, h // 2, w // 2, c, 2, 2).permute(0, 3, 1, 4, 2, 5).reshape(b, c, h, w)


def calculate_shift(image_tokens: int, scheduler_config, max_shift_default: float = 1.15) -> float:
    """mu of dynamic shifting at `image_tokens`, with the scheduler config's bounds (diffusers' `calculate_shift`)."""
    from diffusers.pipelines.flux.pipeline_flux import calculate_shift as diffusers_calculate_shift

    cfg = scheduler_config
    return diffusers_calculate_shift(image_tokens, cfg.get("base_image_seq_len", 256), cfg.get("max_image_seq_len", 4096),
                                     cfg.get("base_shift", 0.5), cfg.get("max_shift", max_shift_default))


def schedule_shift(scheduler_config, image_tokens: int, max_shift_default: float = 1.15) -> float:
    """The static shift equivalent to a scheduler config at `image_tokens` latent tokens (module docstring)."""
    cfg = scheduler_config
    if cfg.get("use_dynamic_shifting"):
        mu = calculate_shift(image_tokens, cfg, max_shift_default)
        return math.exp(mu) if cfg.get("time_shift_type", "exponential") == "exponential" else mu
    return float(cfg.get("flow_shift") or cfg.get("shift") or 1.0)


class DiffusersPolicy:
    """Shared machinery; subclasses set the class attributes and implement the three hooks."""

    family: str
    pipeline_class: str                      # diffusers class name
    default_hub_id: str                      # used when model.path is None
    text_components: tuple[str, ...]         # pipeline attributes holding text encoders
    lora_target_modules: tuple[str, ...]     # attention projections, as the references adapt
    quant_skip_patterns: tuple[str, ...]     # explore-engine layers kept in full precision (regex on module names)
    explore_keep = None                      # the Sol-RL reference's further bf16 layers (explore_layers.py); None: none
    default_max_sequence_length: int
    packed = False                           # 2x2 token packing (FLUX, Qwen-Image)
    max_shift_default = 1.15                 # the pipeline's max_shift fallback for dynamic shifting
    extra_options: tuple[str, ...] = ()      # family-specific keys of model.options
    prompt_tokenizer = "tokenizer"           # the tokenizer that max_sequence_length limits
    decode_batch_size = 4                    # VAE decodes are memory-hungry at 1024 px
    vae_dtype: torch.dtype | None = None     # the VAE's dtype when its reference decodes in another (None: model.dtype)

    def __init__(self, pipe, device: str = "cpu", resolution: int | None = None, shift: float | None = None,
                 offload: bool = False, **options):
        valid = ("max_sequence_length", "cache_size", "truncate_prompts", *self.extra_options)
        unknown = sorted(set(options) - set(valid))
        if unknown:
            raise ValueError(f"{self.family}: unknown model.options {unknown}; valid: {', '.join(valid)}")
        self.pipe = pipe
        self.transformer = pipe.transformer
        self.device = torch.device(device)
        self.offload = offload and self.device.type != "cpu"
        self.options = options
        self.max_sequence_length = int(options.get("max_sequence_length", self.default_max_sequence_length))
        # the references cut longer prompts silently; solrl refuses them unless asked to cut (max_prompt_tokens)
        self.truncate_prompts = bool(options.get("truncate_prompts", False))
        self.dtype = self.transformer.dtype
        scale = pipe.vae_scale_factor
        native = (getattr(pipe, "default_sample_size", None) or self.transformer.config.sample_size) * scale
        self.resolution = int(resolution or native)
        multiple = 2 if self.packed else self.transformer.config.get("patch_size", 1)
        if self.resolution % (scale * multiple):
            raise ValueError(f"{self.family}: resolution {self.resolution} must be a multiple of {scale * multiple} "
                             f"(VAE factor {scale} x patch {multiple})")
        side = self.resolution // scale
        channels = self.transformer.config.in_channels // (4 if self.packed else 1)
        self.sample_shape = (channels, side, side)
        sched = pipe.scheduler.config
        self.image_tokens = (side // multiple) ** 2
        self.shift_override = None if shift is None else float(shift)
        self.shift = self.shift_override if shift is not None else schedule_shift(sched, self.image_tokens, self.max_shift_default)
        self._cache: collections.OrderedDict[str, PromptEmbeds] = collections.OrderedDict()
        self._cache_size = int(options.get("cache_size", 1024))
        self.transformer.to(self.device)
        if self.vae_dtype is not None and pipe.vae.dtype != self.vae_dtype:  # a pipeline built in code; loading sets it
            pipe.vae.to(dtype=self.vae_dtype)
        for module in self._helpers():
            module.to("cpu" if self.offload else self.device)

    # ---- sampling grid ---------------------------------------------------------------------
    def sigmas(self, num_steps: int) -> torch.Tensor:
        """The N + 1 sigmas (1 -> 0, float64) the pipeline samples with at this resolution (module docstring)."""
        if self.shift_override is not None:
            return timesteps(num_steps, self.shift_override)
        from diffusers.pipelines.flux.pipeline_flux import retrieve_timesteps

        scheduler = type(self.pipe.scheduler).from_config(self.pipe.scheduler.config)
        retrieve_timesteps(scheduler, num_steps, "cpu", **self._grid_arguments(num_steps, scheduler.config))
        return scheduler.sigmas.double()

    def _grid_arguments(self, num_steps: int, config) -> dict:
        """What the pipeline's __call__ hands `retrieve_timesteps` (SD3.5 / SANA: mu only with dynamic shifting)."""
        if not config.get("use_dynamic_shifting"):
            return {}
        return {"mu": calculate_shift(self.image_tokens, config, self.max_shift_default)}

    # ---- loading ---------------------------------------------------------------------------
    @classmethod
    def from_pretrained(cls, path=None, shift=None, dtype: str = "float32", device: str = "cpu", resolution=None,
                        gradient_checkpointing: bool = False, offload: bool = False, vae_tiling: bool = False,
                        options: dict | None = None):
        source = str(path or cls.default_hub_id)
        missing = (f"{cls.family}: no {cls.pipeline_class} at {source!r}. Expected a local directory written by "
                   f"save_pretrained (model_index.json and one folder per component) or a hub id (e.g. "
                   f"{cls.default_hub_id}) already in the Hugging Face cache, as this machine may be offline; set model.path")
        local = Path(source).expanduser()
        looks_local = local.exists() or source.startswith((".", "/", "~")) or source.count("/") > 1
        if looks_local and not (local / "model_index.json").exists():
            raise FileNotFoundError(missing)
        try:
            import diffusers

            model_dtype = torch_dtype(dtype, "model.dtype")
            dtypes = model_dtype if cls.vae_dtype is None else {"default": model_dtype, "vae": cls.vae_dtype}
            pipe = getattr(diffusers, cls.pipeline_class).from_pretrained(source, dtype=dtypes)
        except ImportError as exc:
            raise ImportError(f"{cls.family}: loading {source!r} needs the package {exc.name or exc}; "
                              f"install it (pip install {exc.name or 'diffusers transformers'})") from exc
        except OSError as exc:
            raise FileNotFoundError(f"{missing}. Cause: {exc}") from exc
        pipe.set_progress_bar_config(disable=True)
        if gradient_checkpointing:
            pipe.transformer.enable_gradient_checkpointing()
        if vae_tiling:
            pipe.vae.enable_tiling()
        return cls(pipe, device=device, resolution=resolution, shift=shift, offload=offload, **(options or {}))

    def _helpers(self) -> list[torch.nn.Module]:
        mods = [getattr(self.pipe, name, None) for name in (*self.text_components, "vae")]
        return [m for m in mods if m is not None]

    @contextlib.contextmanager
    def _visiting(self, modules):
        """With offload, bring CPU-resident modules to the device for one use, then send them back."""
        if self.offload:
            for m in modules:
                m.to(self.device)
        try:
            yield
        finally:
            if self.offload:
                for m in modules:
                    m.to("cpu")
                if self.device.type == "cuda":
                    torch.cuda.empty_cache()

    # ---- the Policy protocol ---------------------------------------------------------------
    @torch.no_grad()
    def encode_prompts(self, prompts: list[str]) -> PromptEmbeds:
        """Each prompt is encoded alone (its conditioning does not depend on the batch) and cached on the CPU."""
        missing = [p for p in dict.fromkeys(prompts) if p not in self._cache]
        if missing:
            encoders = [getattr(self.pipe, n) for n in self.text_components if getattr(self.pipe, n, None) is not None]
            with self._visiting(encoders):
                for prompt in missing:
                    self._cache[prompt] = self._encode_one(prompt).to("cpu")
        for p in prompts:
            self._cache.move_to_end(p)
        rows = [self._cache[p] for p in prompts]
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return PromptEmbeds.cat(rows)

    @property
    def max_prompt_tokens(self) -> int | None:
        """The long-context encoder's limit, which prompts are checked against before training (the CLIP
        encoders' 77 tokens are cut by design in every pipeline); None with `truncate_prompts`: the
        pipeline cuts longer prompts at max_sequence_length, as the references do."""
        if self.truncate_prompts:
            return None
        return self.max_sequence_length if getattr(self.pipe, self.prompt_tokenizer, None) is not None else None

    def count_prompt_tokens(self, prompts: list[str]) -> list[int]:
        tokenizer = getattr(self.pipe, self.prompt_tokenizer)
        return [len(ids) for ids in tokenizer(list(prompts), truncation=False)["input_ids"]]

    def velocity(self, x: torch.Tensor, t: torch.Tensor, cond: PromptEmbeds) -> torch.Tensor:
        cond = cond.to(device=x.device, dtype=self.dtype)
        v = self._forward(x.to(self.dtype), t.to(device=x.device, dtype=torch.float32), cond)
        return v.to(x.dtype)

    @torch.no_grad()
    def decode(self, x: torch.Tensor) -> torch.Tensor:
        vae = self.pipe.vae
        out = []
        with self._visiting([vae]):
            for chunk in x.split(self.decode_batch_size):
                image = self._decode_latents(chunk.to(self.device, vae.dtype))
                out.append(((image.float() + 1) / 2).clamp(0, 1).to(x.device))
        return torch.cat(out)

    # ---- family hooks ------------------------------------------------------------------------
    def _encode_one(self, prompt: str) -> PromptEmbeds:
        raise NotImplementedError

    def _forward(self, x: torch.Tensor, t: torch.Tensor, cond: PromptEmbeds) -> torch.Tensor:
        """Velocity in sample space for x in the model dtype and flow time t (float32, [0, 1])."""
        raise NotImplementedError

    def _decode_latents(self, x: torch.Tensor) -> torch.Tensor:
        """Sample space -> images in [-1, 1] (the VAE's own range)."""
        raise NotImplementedError
