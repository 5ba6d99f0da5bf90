#!/usr/bin/env bash
# Fetch here the wheels that the lent GPU machine lacks, into .whl/ (ignored by git), for bench/gpu_check.sh.
#
# That machine (the device tool's nvidia-h200) runs Python 3.12 with torch, numpy, pytest, tensorboard, matplotlib,
# pyyaml, tqdm and cloudpickle already installed, and reaches no package index: Gymnasium, the Arcade Learning
# Environment and Stable-Baselines3 travel as wheels, at the versions this checkout's .venv runs (so the GPU
# figures come from the code the CPU figures come from). MuJoCo stays behind: the GPU check measures the Atari
# agents, whose convolutions are what a GPU is for.
#
# Ray (for bench/gpu_followup.sh's distributed workers) goes to .whl/ray/: its wheel is 79 MB, more than the device
# tool carries (64 MiB in all), so it travels as ray-<version>-core.tar.xz, 30 MB: the package without its Java
# jars and the libraries torchforce does not use (RLlib, Data, Serve, Train, Tune, LLM), which leaves Ray Core
# (ray.init, actors, placement groups) whole; beside it the wheels of Ray's own dependencies, which the GPU check
# installs only where the machine lacks them. Recompressing takes about 1.5 minutes; RAY=0 leaves Ray out.
#
#   bash bench/gpu_wheels.sh              # Python 3.12 wheels (the GPU machine's)
#   PYTHON_VERSION=3.11 bash bench/gpu_wheels.sh   # another Python's (to rehearse gpu_check.sh here)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON_VERSION=${PYTHON_VERSION:-3.12}
PACKAGES=(gymnasium farama-notifications ale-py stable-baselines3)

pinned=()
for package in "${PACKAGES[@]}"; do
    version=$(.venv/bin/python -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$package")
    pinned+=("$package==$version")
done

platforms=()
for platform in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
    manylinux1_x86_64; do
    platforms+=(--platform "$platform")
done

rm -rf .whl
mkdir .whl
.venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version "$PYTHON_VERSION" \
    --implementation cp "${platforms[@]}" -d .whl "${pinned[@]}"
if [[ ${RAY:-1} == 1 ]]; then
    version=$(.venv/bin/python -c "import importlib.metadata as m; print(m.version('ray'))")
    mkdir .whl/ray
    .venv/bin/python -m pip download -q --only-binary=:all: --python-version "$PYTHON_VERSION" --implementation cp \
        "${platforms[@]}" -d .whl/ray "ray==$version"
    unpacked=$(mktemp -d)
    unzip -q .whl/ray/ray-"$version"-*.whl -d "$unpacked"  # unzip keeps the programs' modes (the raylet's)
    rm .whl/ray/ray-"$version"-*.whl
    rm -rf "$unpacked"/ray/{jars,rllib,data,serve,train,tune,llm}
    tar -C "$unpacked" -cJf .whl/ray/ray-"$version"-core.tar.xz ray ray-"$version".dist-info
    rm -rf "$unpacked"
fi
echo "wheels for Python $PYTHON_VERSION in .whl/ ($(du -sh .whl | cut -f1)): run bench/gpu_check.sh on the GPU" \
    "machine with .whl carried"
ls -R .whl
