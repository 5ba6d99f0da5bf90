"""TensorForce 0.4's ``contrib`` paths, for ported scripts: ``torchforce.contrib.openai_gym.OpenAIGym`` is the Gym
adapter (``torchforce.environments.Gym``). The other 0.4 contrib environments (ALE, Maze Explorer, DeepMind Lab,
Unreal Engine, Universe, Retro, PLE, 2048) are not ported: Gymnasium registers ALE games (``ALE/Pong-v5``)."""
