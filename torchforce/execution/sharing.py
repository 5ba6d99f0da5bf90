"""Worker agents that learn into one model (the ThreadedRunner's hogwild workers, 2018's ``WorkerAgentGenerator``).

A worker shares the main agent's networks and optimizers, the same objects, so what either learns is the other's,
while its memory, episode bookkeeping, exploration and preprocessing stay its own. Acting runs in parallel; updates
take turns on the main agent's ``update_lock``, which whoever needs a consistent model (a save) holds too.

The workers share the model's timestep too (``Agent.model_timestep``, one ``ModelClock``): it counts every worker's
acts, as the one timestep counter of 2018's shared model did, and what the shared objects follow reads it. So the
target network syncs every ``target_sync_frequency`` acts in all, and the learning-rate schedules, PPO's clipping
schedule and the explorations' epsilon and noise schedules run over the acts in all (2018's explorations read the
model's global timestep too). A worker's own count, about 1/N of them with N workers, would sync the one shared
``Synchronization`` only every N * ``target_sync_frequency`` acts in all and run the schedules N times slower.
What pairs with a worker's own memory stays on its own count: its first update (``update_mode``) and DDPG's
``random_timesteps``, which fill that memory before it updates.
"""

from __future__ import annotations

import threading

from torchforce.agents import Agent
from torchforce.agents.clock import ModelClock


def share_model(worker: Agent, main: Agent) -> None:
    """Make ``worker`` a worker of ``main`` (an agent of the same kind and spec): ``worker``'s attributes that hold
    one of its modules or optimizers now hold ``main``'s, the two update in turn on one ``update_lock``, and the
    model's timestep counts ``worker``'s acts from now on too."""
    if main.name != worker.name:
        raise TypeError(f"a {worker.name} agent cannot share the model of a {main.name} agent")
    shared = {**main.trainable_modules(), **main.optimizers()}
    own = {**worker.trainable_modules(), **worker.optimizers()}
    if own.keys() != shared.keys():
        raise ValueError(f"the agents differ in their model: {sorted(own)} against {sorted(shared)}")
    replace = {id(own[key]): shared[key] for key in own}
    for attribute, value in list(vars(worker).items()):
        if id(value) in replace:
            setattr(worker, attribute, replace[id(value)])
        elif any(id(item) in replace for item in _items(value)):  # it would go on stepping its own, unseen
            raise TypeError(
                f"the {worker.name} agent keeps one of its modules or optimizers in '{attribute}' (a "
                f"{type(value).__name__}), where sharing a model cannot put the shared one: read it from the agent's "
                "own attribute when it is needed"
            )
    if main.update_lock is None:  # reentrant: who holds it for a consistent model (an evaluation) may act under it
        main.update_lock = threading.RLock()
    worker.update_lock = main.update_lock
    if main.model_clock is None:
        main.model_clock = ModelClock(main)
    if worker.model_clock is not main.model_clock:
        main.model_clock.join(worker)
        worker.model_clock = main.model_clock


def _items(value: object) -> tuple[object, ...]:
    """What a tuple, list, set or dict (its values) holds; nothing for anything else."""
    if isinstance(value, dict):
        return tuple(value.values())
    return tuple(value) if isinstance(value, (tuple, list, set, frozenset)) else ()
