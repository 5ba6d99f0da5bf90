"""Learning tests: each agent, with its shipped tuned config and number of environments (the shipped experiment
``cartpole_<agent>``), reaches a deterministic mean return >= 475 over 20 evaluation episodes on CartPole-v1
within 100,000 environment steps, for at least 2 of 3 seeds. PPO must also keep what it learned: 20,000 more
steps of training leave the deterministic mean at 475 or more."""

import json

import numpy as np
import pytest

from torchforce.configs import shipped
from torchforce.environments import make, make_vector
from torchforce.execution import Runner
from torchforce.execution.evaluation import evaluate
from torchforce.execution.training import train

THRESHOLD = 475.0
BUDGET = 100_000
MORE = 20_000


def shipped_setup(agent: str) -> tuple[str, int]:
    experiment = json.loads(shipped("experiments", f"cartpole_{agent}").read_text())
    return str(shipped("agents", experiment["agent"])), experiment["num_environments"]


def after_more_training(agent, environments: int, seed: int) -> float:
    """The deterministic mean return after ``MORE`` further steps of training on fresh environments."""
    training = make_vector("CartPole-v1", environments, seed=seed + 1_000)
    evaluation = make("CartPole-v1")
    evaluation.seed(seed + 2_000)
    try:
        Runner(agent, training).run(num_timesteps=MORE)
        return float(np.mean(evaluate(agent, evaluation, episodes=20)))
    finally:
        training.close()
        evaluation.close()


@pytest.mark.learning
@pytest.mark.parametrize("name, lasting", [("ppo", True), ("dqn", False)])
def test_agent_solves_cartpole_for_two_of_three_seeds(name, lasting):
    config, environments = shipped_setup(name)
    outcomes = {}
    for seed in (0, 1, 2):
        agent, result = train(config, "CartPole-v1", num_environments=environments, seed=seed, num_timesteps=BUDGET,
                              threshold=THRESHOLD, eval_every=2_500)  # fmt: skip
        outcome = {"steps": result.timesteps_to_threshold}
        if result.solved and lasting:
            outcome["after"] = after_more_training(agent, environments, seed)
        outcome["ok"] = result.solved and outcome.get("after", THRESHOLD) >= THRESHOLD
        outcomes[seed] = outcome
        passed = sum(o["ok"] for o in outcomes.values())
        if passed >= 2 or passed + (2 - seed) < 2:
            break
    assert sum(o["ok"] for o in outcomes.values()) >= 2, f"by seed: {outcomes}"
