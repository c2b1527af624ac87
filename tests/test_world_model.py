"""The world model imagines rewards and losses at the rate real play has them (issue 31, part 2):
class-balanced heads, calibrated by the class prior, an expected reward and sampled episode ends."""

from __future__ import annotations

import torch

from frugalrl.latent.envs import VirtualVectorEnv
from frugalrl.latent.quality import roc_auc
from frugalrl.latent.world_model import REWARD_CLASSES, LatentWorldModel

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


def test_an_encoder_file_saved_before_the_counts_loads_with_a_uniform_prior():
    wm = LatentWorldModel(D, A, [16])
    state = {k: v for k, v in wm.state_dict().items() if not k.endswith("_counts")}
    fresh = LatentWorldModel(D, A, [16])
    fresh.load_state_dict(state)
    assert torch.equal(fresh.reward_counts, torch.ones(3)) and torch.equal(fresh.done_counts, torch.ones(2))
