"""The world model imagines rewards and losses at the rate real play has them (issue 31, part 2):
class-balanced heads, calibrated by the class prior, an expected reward and sampled episode ends."""

from __future__ import annotations

import torch

from frugalrl.latent.envs import VirtualVectorEnv
from frugalrl.latent.quality import roc_auc
from frugalrl.latent.world_model import MAX_CLASS_WEIGHT, REWARD_CLASSES, LatentWorldModel

D, A = 8, 4


def _fit(world_model: LatentWorldModel, reward_rate: float, done_rate: float, steps: int = 300) -> None:
    """Rare events that no input predicts: the calibrated probability must come out as their rate."""
    gen = torch.Generator().manual_seed(0)
    optimizer = torch.optim.Adam(world_model.parameters(), lr=3e-3)
    for _ in range(steps):
        z = torch.rand(256, D, generator=gen) * 2 - 1
        a = torch.randint(0, A, (256,), generator=gen)
        reward = (torch.rand(256, generator=gen) < reward_rate).float()
        done = torch.rand(256, generator=gen) < done_rate
        loss, _ = world_model.loss(z, a, z, reward, done)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def test_imagined_reward_and_end_rates_match_the_real_rates_where_no_input_predicts_them():
    torch.manual_seed(0)
    wm = LatentWorldModel(D, A, [32])
    _fit(wm, reward_rate=0.05, done_rate=0.02)
    env = VirtualVectorEnv(wm, torch.rand(64, D) * 2 - 1, num_envs=64, horizon=1000, seed=1)
    env.reset(seed=1)
    rewards, ends = [], []
    for _ in range(200):
        _, reward, terminated, _, _ = env.step(torch.randint(0, A, (64,)).numpy())
        rewards.append(reward)
        ends.append(terminated.float())
    imagined_reward, imagined_ends = float(torch.cat(rewards).mean()), float(torch.cat(ends).mean())
    assert abs(imagined_reward - 0.05) < 0.015, imagined_reward
    assert abs(imagined_ends - 0.02) < 0.008, imagined_ends
    # what the argmax of the same heads imagined before: never a reward, never an end
    pred = wm(torch.rand(512, D) * 2 - 1, torch.randint(0, A, (512,)))
    assert (REWARD_CLASSES[(pred.reward_logits + wm.reward_counts.log()).argmax(-1)] == 0).all()


def test_events_rarer_than_the_weight_cap_allows_come_out_at_their_rate():
    """A game end once in 1,000 steps (Boxing's: once in about 1,800) is weighted at the cap, not at its
    inverse frequency: the calibration divides by the weights used, so the probability is its rate (dividing
    by the prior instead gave 0.00012 here, an eighth)."""
    torch.manual_seed(0)
    wm = LatentWorldModel(D, A, [32])
    _fit(wm, reward_rate=0.002, done_rate=0.001, steps=600)
    assert float(wm._class_weights(wm.done_counts)[1]) == MAX_CLASS_WEIGHT  # the cap binds
    with torch.no_grad():
        pred = wm(torch.rand(4096, D) * 2 - 1, torch.randint(0, A, (4096,)))
    done, reward = float(wm.done_prob(pred).mean()), float(wm.reward_probs(pred)[:, 2].mean())
    assert 0.0005 < done < 0.002, done
    assert 0.001 < reward < 0.004, reward


def test_a_head_that_can_tell_ranks_rewarded_steps_first():
    """Reward when the first latent coordinate is high: the balanced head learns to rank by it."""
    torch.manual_seed(0)
    wm = LatentWorldModel(D, A, [32])
    gen = torch.Generator().manual_seed(0)
    optimizer = torch.optim.Adam(wm.parameters(), lr=3e-3)
    for _ in range(300):
        z = torch.rand(256, D, generator=gen) * 2 - 1
        reward = (z[:, 0] > 0.9).float()  # about 5% of steps
        loss, _ = wm.loss(z, torch.zeros(256, dtype=torch.long), z, reward, torch.zeros(256, dtype=torch.bool))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    z = torch.rand(2000, D, generator=gen) * 2 - 1
    with torch.no_grad():
        p_event = 1 - wm.reward_probs(wm(z, torch.zeros(2000, dtype=torch.long)))[:, 1]
    assert roc_auc(p_event, z[:, 0] > 0.9) > 0.95
    assert abs(float(p_event.mean()) - 0.05) < 0.03  # and the probabilities stay calibrated


def test_a_head_ranks_rewards_that_a_small_latent_spread_decides():
    """Latents as the shared Atari encoder gives them (spread about 0.03 around an offset), and a reward
    when two coordinates nearly agree, as a punch lands only when the boxers are close. Fed raw, the
    head ranks these steps at chance (AUC 0.49 with the model before the statistics); standardised,
    it ranks by them (0.82)."""
    torch.manual_seed(0)
    wm = LatentWorldModel(D, A, [32])
    gen = torch.Generator().manual_seed(0)
    optimizer = torch.optim.Adam(wm.parameters(), lr=3e-3)

    def batch(n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        z = 0.3 + 0.03 * torch.randn(n, D, generator=gen)
        return z, torch.randint(0, A, (n,), generator=gen), ((z[:, 0] - z[:, 1]).abs() < 0.003).float()  # ~6%

    for _ in range(300):
        z, a, reward = batch(256)
        loss, _ = wm.loss(z, a, z, reward, torch.zeros(256, dtype=torch.bool))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert torch.allclose(wm.latent_mean, torch.full((D,), 0.3), atol=0.01)
    assert torch.allclose(wm.latent_scale(), torch.full((D,), 0.03), atol=0.005)
    z, a, reward = batch(4000)
    with torch.no_grad():
        p_event = 1 - wm.reward_probs(wm(z, a))[:, 1]
    assert roc_auc(p_event, reward.bool()) > 0.75


def test_an_encoder_file_saved_before_the_latent_statistics_sees_the_raw_latent():
    wm = LatentWorldModel(D, A, [16])
    z, a = torch.rand(64, D) * 0.1, torch.randint(0, A, (64,))
    before = wm(z, a)
    state = {k: v for k, v in wm.state_dict().items() if not k.startswith("latent_")}
    old = LatentWorldModel(D, A, [16])
    old.latent_mean += 5.0  # whatever it held is replaced by the defaults the file was trained with
    old.load_state_dict(state)
    assert torch.equal(old.latent_mean, torch.zeros(D)) and torch.equal(old.latent_var, torch.ones(D))
    assert float(old.latent_seen) == 0.0
    after = old(z, a)
    assert torch.equal(before.next_latent, after.next_latent) and torch.equal(before.reward_logits, after.reward_logits)


def test_an_encoder_file_saved_before_the_counts_loads_with_a_uniform_prior():
    wm = LatentWorldModel(D, A, [16])
    state = {k: v for k, v in wm.state_dict().items() if not k.endswith("_counts")}
    fresh = LatentWorldModel(D, A, [16])
    fresh.load_state_dict(state)
    assert torch.equal(fresh.reward_counts, torch.ones(3)) and torch.equal(fresh.done_counts, torch.ones(2))


class _Rollout:
    """What the refresher reads of a PPO learner after a rollout: obs (T, N, D) and the rest (T, N)."""

    def __init__(self, obs: torch.Tensor, dones: torch.Tensor):
        steps, envs = obs.shape[:2]
        self.obs, self.dones = obs, dones
        self.actions = torch.zeros(steps, envs)
        self.rewards = torch.zeros(steps, envs)


def _refresher(rollout_steps: int, capacity: int = 50_000):
    from frugalrl.cost import CostMeter
    from frugalrl.latent.dyna import WorldModelRefresher
    from frugalrl.latent.store import LatentModels

    from .test_latent import breakout

    config = breakout(world_model={"hidden": [16], "rollout_steps": rollout_steps, "refresh_steps": 3})
    models = LatentModels(None, None, LatentWorldModel(D, A, [16]), {})
    return WorldModelRefresher(models, config, CostMeter(), capacity=capacity)


def test_multi_step_refit_unrolls_only_along_one_env_within_one_rollout():
    refresher = _refresher(rollout_steps=3)
    for _ in range(2):  # two rollouts of 5 steps (4 transitions each) of 2 envs
        obs = torch.rand(5, 2, D)
        refresher.add(_Rollout(obs, torch.zeros(5, 2)))
    starts = refresher._starts(3)
    seq, t = refresher.buffer["seq"], refresher.buffer["t"]
    assert sorted(t[starts].tolist()) == [0, 0, 0, 0, 1, 1, 1, 1]  # t + 2 <= 3 in each env of each rollout
    for j in (1, 2):
        assert torch.equal(seq[starts + 2 * j], seq[starts]) and torch.equal(t[starts + 2 * j], t[starts] + j)
    trimmed = _refresher(rollout_steps=3, capacity=13)  # a buffer cut mid-rollout still never crosses rollouts
    for _ in range(3):
        trimmed.add(_Rollout(torch.rand(5, 2, D), torch.zeros(5, 2)))
    starts = trimmed._starts(3)
    assert len(starts) > 0
    assert torch.equal(trimmed.buffer["seq"][starts + 4], trimmed.buffer["seq"][starts])


def test_multi_step_refit_costs_k_model_steps_and_stops_at_an_episode_end():
    one, three = _refresher(rollout_steps=1), _refresher(rollout_steps=3)
    obs, dones = torch.rand(9, 4, D), torch.zeros(9, 4)
    for refresher in (one, three):
        refresher.add(_Rollout(obs, dones))
        refresher.refit()
    per_sample = {k: r.meter.flops_per_sample["world_model_train"] for k, r in ((1, one), (3, three))}
    assert 2.5 < per_sample[3] / per_sample[1] < 3.5  # three forward and backward passes instead of one
    ended = _refresher(rollout_steps=3)
    dones = torch.ones(9, 4)  # every step ends an episode: no step after the first is open-loop
    ended.add(_Rollout(obs, dones))
    idx = ended._starts(3)
    first = ended.wm(ended.buffer["z"][idx], ended.buffer["a"][idx]).next_latent
    assert float(ended._open_loop(idx, first, 3)) == 0.0


def test_the_diagnostic_gate_passes_fails_or_says_it_cannot_tell():
    from frugalrl.latent.quality import diagnostic_gate

    good = {"wm_reward_auc": 0.9, "wm_imagined_events": 0.22, "wm_real_events": 0.2, "wm_horizon_k": 16.0}
    assert diagnostic_gate(good, 0.8, 0.25)[0] == "passed"
    status, reason = diagnostic_gate({**good, "wm_reward_auc": 0.55, "wm_imagined_events": 0.07}, 0.8, 0.25)
    assert status == "failed" and "AUC 0.55" in reason and "0.35x" in reason
    assert diagnostic_gate({**good, "wm_real_events": 0.0}, 0.8, 0.25)[0] == "not measurable"
    assert diagnostic_gate({**good, "wm_reward_auc": None}, 0.8, 0.25)[0] == "not measurable"
    # no 200-step window in a 128-step rollout: that is the reason given, not a missing reward
    status, reason = diagnostic_gate({**good, "wm_horizon_k": 200.0, "wm_rollout_steps": 128.0,
                                      "wm_imagined_events": None, "wm_real_events": None}, 0.8, 0.25)  # fmt: skip
    assert status == "not measurable" and "horizon (200 steps" in reason and "rollout (128 steps" in reason


def test_real_and_imagined_events_count_from_the_same_starts_up_to_the_episodes_end():
    """Both sides of the gate's event count from every start with k steps after it: the real one up to
    and including the step that ended its episode, the imagined one weighted by its survival."""
    from types import SimpleNamespace

    from frugalrl.latent.quality import world_model_quality

    wm = LatentWorldModel(D, A, [])  # heads straight on the input: zero weights, the biases decide
    with torch.no_grad():
        for head in (wm.reward, wm.done):
            head.weight.zero_()
        wm.reward.bias.copy_(torch.log(torch.tensor([0.125, 0.75, 0.125])))  # a nonzero reward: 0.25
        wm.done.bias.fill_(float(torch.logit(torch.tensor(0.1))))  # an end: 0.1 per step
    policy = SimpleNamespace(act=lambda latent: SimpleNamespace(action=torch.zeros(len(latent), dtype=torch.long)))
    T = 6
    obs, actions = torch.zeros(T, 1, D), torch.zeros(T, 1, dtype=torch.long)
    rewards = torch.tensor([0.0, 1.0, 1.0, 0.0, 0.0, 0.0]).reshape(T, 1)
    dones = torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0, 0.0]).reshape(T, 1)  # the episode ends at step 1
    figures = world_model_quality(wm, policy, obs, actions, rewards, dones, k=2)
    # starts 0-3: events 1 (steps 0-1), 1 (step 1 ends it; step 2 is the next episode's), 1, 0
    assert figures["wm_real_events"] == 0.75 and figures["wm_real_return"] == 0.75
    assert figures["wm_real_survival"] == 0.5  # starts 0 and 1 reach the end within 2 steps
    assert abs(figures["wm_imagined_events"] - (0.25 + 0.25 * 0.9)) < 1e-5
    assert abs(figures["wm_imagined_survival"] - 0.81) < 1e-5
    assert figures["wm_latent_error_k"] == 0.0  # on the starts whose 2 steps stay in one episode (2 and 3)
