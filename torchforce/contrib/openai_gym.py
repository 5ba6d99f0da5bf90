"""0.4's ``tensorforce.contrib.openai_gym``: ``OpenAIGym(gym_id, monitor=None, monitor_safe=False, monitor_video=0,
visualize=False)`` is ``torchforce.environments.Gym``, which takes those arguments and more."""

from torchforce.environments.gym import Gym as OpenAIGym

__all__ = ["OpenAIGym"]
