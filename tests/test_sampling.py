
import pytest
import torch

from solrl.rollout.sampling import guided_velocity, sample, shift_time, timesteps
from solrl.seeding import initial_noise


def test_noise_of_a_seed_ignores_batch_size_order_and_dtype():
    shape = (3, 8, 8)
    alone = initial_noise([7], shape)
    batch = initial_noise([1, 7, 3], shape)
    reordered = initial_noise([3, 1, 7, 9, 11], shape)
    assert torch.equal(alone[0], batch[1])
    assert torch.equal(alone[0], reordered[2])
    as_bf16 = initial_noise([7], shape, dtype=torch.bfloat16)
    assert as_bf16.dtype == torch.bfloat16
    assert torch.equal(as_bf16[0], alone[0].to(torch.bfloat16))
    assert not torch.equal(initial_noise([8], shape)[0], alone[0])


def test_generation_is_bitwise_independent_of_batch_composition(toy_policy):
    from solrl.rollout.generation import generate

    prompts, seeds = ["two red circles", "one blue square", "four green triangles"], [3, 1, 4]
    together = generate(toy_policy, prompts, seeds, steps=2, batch_size=4)
    reordered = generate(toy_policy, prompts[::-1], seeds[::-1], steps=2, batch_size=4).flip(0)
    alone = torch.cat([generate(toy_policy, [p], [s], steps=2, batch_size=4) for p, s in zip(prompts, seeds)])
    assert torch.equal(together, reordered) and torch.equal(together, alone)


def test_shifted_schedule_matches_hand_values():
    # s = 3: t' = 3t / (1 + 2t); t = 0.5 -> 1.5 / 2 = 0.75
    assert shift_time(torch.tensor(0.5), 3.0).item() == pytest.approx(0.75)
    grid = timesteps(4, shift=3.0)
    expected = [1.0, 2.25 / 2.5, 0.75, 0.75 / 1.5, 0.0]  # t = 1, .75, .5, .25, 0
    assert grid.tolist() == pytest.approx(expected)
    assert timesteps(2).tolist() == [1.0, 0.5, 0.0]
    with pytest.raises(ValueError, match="num_steps"):
        timesteps(0)


def _point_mass_velocity(a):
    # Data = the single point a: the exact velocity field is v = (x - a) / t (linear in x).
    return lambda x, t, cond: (x - a) / t.view(-1, *([1] * (x.ndim - 1)))


@pytest.mark.parametrize("solver", ["euler", "dpm2"])
@pytest.mark.parametrize("shift", [1.0, 3.0])
def test_solvers_are_exact_on_a_linear_field(solver, shift):
    a = torch.tensor([[0.3, -1.2, 2.0]], dtype=torch.float64)
    noise = torch.randn(5, 3, dtype=torch.float64)
    out = sample(_point_mass_velocity(a), noise, None, num_steps=3, shift=shift, solver=solver)
    torch.testing.assert_close(out, a.expand(5, 3), atol=1e-12, rtol=0)


def _gaussian_velocity(m, s):
    # Data ~ N(m, s^2): E[x0 | x_t] is linear in x_t, so v is known in closed form.
    def v(x, t, cond):
        t = t.view(-1, 1)
        a = 1 - t
        x0_mean = m + a * s * s / (a * a * s * s + t * t) * (x - a * m)
        return (x - x0_mean) / t
    return v


def test_dpm2_beats_euler_at_equal_steps_on_a_smooth_field():
    m, s = 0.7, 0.3
    noise = torch.randn(512, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    exact = m + s * noise  # the ODE's exact flow map from t = 1 to t = 0
    for steps in (5, 10, 20):
        err = {solver: (sample(_gaussian_velocity(m, s), noise, None, steps, 1.0, solver) - exact).abs().max().item()
               for solver in ("euler", "dpm2")}
        assert err["dpm2"] < 0.85 * err["euler"], (steps, err)


def test_cfg_combines_conditional_and_unconditional_velocities():
    calls = []

    def velocity(x, t, cond):
        calls.append(cond)
        return torch.full_like(x, float(cond))

    fn = guided_velocity(velocity, 3.0, uncond=1.0)
    out = fn(torch.zeros(2, 1), torch.ones(2), 2.0)
    # v_u + g (v_c - v_u) = 1 + 3 * (2 - 1) = 4
    assert torch.equal(out, torch.full((2, 1), 4.0))
    assert calls == [2.0, 1.0]
    assert guided_velocity(velocity, 1.0, None) is velocity
    with pytest.raises(ValueError, match="unconditional"):
        guided_velocity(velocity, 2.0, None)


def test_unknown_solver_is_refused():
    with pytest.raises(ValueError, match="euler, dpm2"):
        sample(lambda x, t, c: x, torch.zeros(1, 1), None, solver="heun")


def test_dpm2_is_diffusers_dpm_solver_pp_2m_with_flow_sigmas():
    """sample(solver="dpm2") against diffusers' DPMSolverMultistepScheduler (DPM-Solver++(2M), midpoint,
    first-order last step, flow sigmas), the solver the DiffusionNFT / Sol-RL references call `dpm2`,
    on its own grid and a smooth non-linear field."""
    from diffusers import DPMSolverMultistepScheduler

    scheduler = DPMSolverMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=3.0,
                                            solver_order=2, algorithm_type="dpmsolver++", solver_type="midpoint",
                                            lower_order_final=True, final_sigmas_type="zero")
    scheduler.set_timesteps(8)
    grid = scheduler.sigmas.double()
    g = torch.Generator().manual_seed(0)
    a = torch.randn(6, 6, generator=g, dtype=torch.float64) * 0.3

    def velocity(x, t, cond):
        return torch.tanh(x @ a) + t.view(-1, 1) * x

    noise = torch.randn(3, 6, generator=g, dtype=torch.float64)
    x = noise.clone()
    for i, t in enumerate(scheduler.timesteps):
        x = scheduler.step(velocity(x, torch.full((3,), float(grid[i]), dtype=torch.float64), None), t, x).prev_sample
    ours = sample(velocity, noise, None, num_steps=8, solver="dpm2", grid=grid)
    torch.testing.assert_close(ours, x, atol=1e-6, rtol=1e-6)  # diffusers keeps its sigmas in float32: 1.6e-7 seen
    assert (sample(velocity, noise, None, num_steps=8, solver="euler", grid=grid) - x).abs().max() > 1e-3


@pytest.mark.parametrize("shift", [1.0, 3.0])
def test_shift_is_diffusers_flow_match_static_shift(shift):
    """shift_time against FlowMatchEulerDiscreteScheduler(shift=s): its sigmas are the shifted
    linspace(1, sigma_min, N), where sigma_min is its smallest training sigma, itself already shifted
    (so the last point is shifted twice); diffusers keeps them in float32."""
    from diffusers import FlowMatchEulerDiscreteScheduler

    scheduler = FlowMatchEulerDiscreteScheduler(shift=shift)
    scheduler.set_timesteps(8)
    sigma_min = shift_time(torch.tensor(1.0 / scheduler.config.num_train_timesteps, dtype=torch.float64), shift)
    unshifted = torch.linspace(1.0, float(sigma_min), 8, dtype=torch.float64)
    torch.testing.assert_close(shift_time(unshifted, shift).float(), scheduler.sigmas[:-1], atol=1e-6, rtol=1e-6)
