"""The state a pickled Gymnasium environment leaves out, kept beside it, so that a checkpoint resumes its episode.

Most environments pickle whole (CartPole's ``state`` is an attribute). Gymnasium's MuJoCo environments and ale-py's
Atari games do not: they pickle through ``gymnasium.utils.EzPickle``, which keeps only the constructor's arguments,
so an unpickled copy is a new simulator, never reset, with a new random generator, and an episode resumed on it goes
on in another world (a fresh MuJoCo model at rest, an emulator at power-on) without a terminal to say so.

``take`` records what such an environment needs to step on exactly as it would have: for MuJoCo the whole ``MjData``
(not only the integration state: an environment may read quantities the last step derived, such as Ant's torso
position before it steps), for ALE the emulator's state with its random generator (``cloneState(include_rng=True)``:
sticky actions draw from it), and for both the environment's ``np_random``, which its resets draw from. ``put``
sets them on the rebuilt environment. ``resumable`` says whether pickling keeps an environment's episode at all: an
``EzPickle`` environment of another kind (Box2D, a third party's) cannot be resumed mid-episode, and a checkpoint of
it saves no episodes in progress (the run resumes with new ones).
"""

from __future__ import annotations

import pickle
import sys
import zlib
from typing import Any

MUJOCO = "mujoco"
ALE = "ale"


def _kind(env: Any) -> str | None:
    """``MUJOCO`` or ``ALE`` for the environments whose state ``take`` records, else None."""
    mujoco_env = sys.modules.get("gymnasium.envs.mujoco.mujoco_env")
    if mujoco_env is not None and isinstance(env, mujoco_env.MujocoEnv):
        return MUJOCO
    ale_env = sys.modules.get("ale_py.env")
    if ale_env is not None and isinstance(env, ale_env.AtariEnv):
        return ALE
    return None


def _rebuilt_by_pickle(env: Any) -> bool:
    from gymnasium.utils.ezpickle import EzPickle

    return isinstance(env, EzPickle)


def resumable(env: Any) -> bool:
    """Whether pickling ``env`` (a Gymnasium environment, unwrapped) and ``put`` keep its episode in progress."""
    return not _rebuilt_by_pickle(env) or _kind(env) is not None


def take(env: Any) -> dict[str, Any] | None:
    """What pickling ``env`` (unwrapped) leaves out and ``put`` needs; None where pickling keeps it all (or where
    nothing can: see ``resumable``)."""
    kind = _kind(env) if _rebuilt_by_pickle(env) else None
    if kind is None:
        return None
    saved: dict[str, Any] = {
        "kind": kind,
        "np_random": env.__dict__.get("_np_random"),
        "np_random_seed": env.__dict__.get("_np_random_seed"),
    }
    if kind == MUJOCO:  # mostly zeros (the arena): compressed, a few kB
        saved["data"] = zlib.compress(pickle.dumps(env.data, protocol=pickle.HIGHEST_PROTOCOL), 1)
    else:
        saved["emulator"] = env.ale.cloneState(include_rng=True)
    return saved


def put(env: Any, saved: dict[str, Any]) -> None:
    """Set what ``take`` recorded on ``env`` (unwrapped), a copy built again from its constructor's arguments."""
    if saved["kind"] == MUJOCO:
        import mujoco

        mujoco.mj_copyData(env.data, env.model, pickle.loads(zlib.decompress(saved["data"])))
    else:
        env.ale.restoreState(saved["emulator"])
    env._np_random = saved["np_random"]
    env._np_random_seed = saved["np_random_seed"]
