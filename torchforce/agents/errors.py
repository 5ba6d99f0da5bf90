"""What an agent raises when learning stopped being finite: ``NonFiniteError`` and ``NonFiniteActionError``."""

from __future__ import annotations


class NonFiniteError(RuntimeError):
    """Learning produced NaN or infinite values (typically a diverged update): raised where they would otherwise
    spread silently (into actions, or prioritized replay's priorities)."""


class NonFiniteActionError(NonFiniteError):
    """``act()`` computed a float action that is NaN or infinite: the policy (or its exploration noise) is no longer
    finite, typically after updates diverged. Raised instead of handing such an action to the environment."""

    def __init__(self, agent: str, action: str, timestep: int, *, policy_finite: bool) -> None:
        if policy_finite:
            cause = "the policy's action was finite, its exploration noise made it NaN or infinite"
            advice = "Lower the exploration's sigma (or mu)."
        else:
            cause = "the policy computed it, so its parameters or inputs are no longer finite (a diverged update?)"
            advice = (
                "Try a lower learning rate, gradient clipping (clip_grad_norm in the optimizer spec) or smaller "
                "rewards (reward_preprocessing), and check that the states are finite."
            )
        super().__init__(
            f"{agent} agent: action '{action}' is NaN or infinite at timestep {timestep}: {cause}. {advice}"
        )
        self.agent, self.action, self.timestep = agent, action, timestep
