"""Progress inside an iteration. The rollout driver and the objectives call one callback, `(stage, done,
total)`, after each batch they finish (RolloutSpec.progress, UpdateContext.progress); this reporter, on
rank 0, turns those calls into a line now and then: the iteration, the stage, the prompt group (or the
training pairs), and how long the iteration and the run have left.

The iteration's time left is each stage's units left at that stage's seconds per unit: measured in this
iteration once the stage has begun, else the previous iteration's, else the stage's forwards per unit at
the seconds per forward the iteration has shown so far. A stage reported in several passes (one per
optimizer step of the iteration, each counting from zero) is added up. Evaluations report through the
same object (`begin` with their own label and one stage).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Stage:
    name: str             # explore | regenerate | generate | train (as the driver and objectives name them)
    units: int            # samples (rollout stages) or (sample, timestep) pairs (train) of this rank
    forwards: float       # transformer forwards per unit, roughly: a first guess at their relative cost
    per_group: int = 0    # units per prompt group (0: not a per-group stage)


@dataclass
class IterationProgress:
    interval: float = 30.0                    # seconds between lines; 0: a line at every prompt group and stage end
    write: Callable[[str], None] = print
    clock: Callable[[], float] = time.monotonic
    iterations: int = 0                       # of the run, for the run's time left
    _stages: dict[str, Stage] = field(default_factory=dict)
    _done: dict[str, int] = field(default_factory=dict)
    _spent: dict[str, float] = field(default_factory=dict)
    _previous: dict[str, float] = field(default_factory=dict)   # seconds per unit, last iteration
    _iteration_seconds: float | None = None

    def begin(self, iteration: int, stages: list[Stage], label: str | None = None) -> None:
        """A new iteration (or, with `label`, another piece of work such as an evaluation) of these stages."""
        self.iteration, self._stages = iteration, {s.name: s for s in stages}
        self.label = label or f"iteration {iteration + 1}" + (f"/{self.iterations}" if self.iterations else "")
        self._done, self._spent, self._raw, self._offset = {}, {}, {}, {}
        self._start = self._last_event = self._last_line = self.clock()

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = self.clock()
        if stage not in self._stages:   # a stage the plan did not foresee: tracked with what it reports
            self._stages[stage] = Stage(stage, total, 1.0)
        if done < self._raw.get(stage, 0):   # a new pass of the stage (the next optimizer step's share)
            self._offset[stage] = self._offset.get(stage, 0) + self._raw[stage]
        self._raw[stage] = done
        done += self._offset.get(stage, 0)
        total = max(self._stages[stage].units, done)
        self._spent[stage] = self._spent.get(stage, 0.0) + now - self._last_event
        self._last_event = now
        before = self._done.get(stage, 0)
        self._done[stage] = done
        per_group = self._stages[stage].per_group
        group_ended = per_group and done // per_group > before // per_group
        due = (group_ended or done >= total) if self.interval == 0 else now - self._last_line >= self.interval
        if due:
            self._last_line = now
            self.write(self.line(stage, done, total))

    def end(self) -> None:
        """The iteration is over: its seconds per unit become the next one's first guess."""
        for name, spent in self._spent.items():
            if self._done.get(name):
                self._previous[name] = spent / self._done[name]
        self._iteration_seconds = self.clock() - self._start

    def seconds_left(self) -> float | None:
        """Seconds the iteration has left (None: nothing to extrapolate from yet)."""
        done_forwards = sum(self._done.get(n, 0) * s.forwards for n, s in self._stages.items())
        elapsed = self._last_event - self._start
        per_forward = elapsed / done_forwards if done_forwards else None
        left = 0.0
        for name, stage in self._stages.items():
            units = max(stage.units - self._done.get(name, 0), 0)
            if not units:
                continue
            if self._done.get(name):
                rate = self._spent[name] / self._done[name]
            elif name in self._previous:
                rate = self._previous[name]
            elif per_forward is not None:
                rate = per_forward * stage.forwards
            else:
                return None
            left += units * rate
        return left

    def line(self, stage: str, done: int, total: int) -> str:
        s = self._stages[stage]
        if s.per_group:
            groups = max(1, -(-total // s.per_group))
            where = f"{done // s.per_group}/{groups} prompt groups done ({done}/{total} samples)"
        else:
            where = f"{done}/{total} {'pairs' if stage == 'train' else 'done'}"
        left = self.seconds_left()
        eta = "ETA ?" if left is None else f"ETA {_clock(left)}"
        run = ""
        if self.iterations and self._iteration_seconds and self.label.startswith("iteration"):
            remaining = self.iterations - self.iteration - 1
            run = f"; the run about {_clock(remaining * self._iteration_seconds + (left or 0.0))} left"
        return f"{self.label} | {stage}: {where} | {_clock(self._last_event - self._start)} in, {eta}{run}"


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


def iteration_stages(spec, groups: int, train_pairs: int, teachers: int) -> list[Stage]:
    """The stages of one iteration of `groups` prompt groups on this rank, in order (RolloutSpec `spec`)."""
    stages = []
    if spec.family in ("sol_rl", "naive_quant"):
        steps = spec.full_steps if spec.family == "naive_quant" else spec.explore_steps
        stages.append(Stage("explore", groups * spec.explore_seeds, steps, spec.explore_seeds))
    if spec.family == "sol_rl":
        stages.append(Stage("regenerate", groups * spec.group_size, spec.full_steps, spec.group_size))
    elif spec.family in ("diffusionnft", "naive_scaling"):
        per_group = spec.seeds_per_prompt
        stages.append(Stage("generate", groups * per_group, spec.full_steps, per_group))
    if train_pairs:
        stages.append(Stage("train", train_pairs, teachers + 3))   # teachers + forward + backward (about two)
    return stages
