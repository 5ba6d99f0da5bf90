# The worker image of the GKE backend: Python, torch, Ray and torchforce, and wget. Every pod of a RayJob runs
# it; the experiment and its results live in the bucket mounted at /mnt/tfcli, never in the image.
#
#   docker build -t IMAGE .                                                          # CPU torch
#   docker build --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu128 -t IMAGE .   # CUDA torch (GPU pools)
#
# No secret goes in: pods reach the bucket through Workload Identity, and the checkpoint-signing key arrives at run
# time from the tfcli-checkpoint-key Secret. .dockerignore keeps .tfcli/, keys and local state out of the context.
FROM python:3.11-slim

# Which build of torch: the CPU wheels by default, a CUDA index (cu128, ...) for GPU nodes.
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# wget: the liveness and readiness probes KubeRay adds to the Ray pods run `wget ... | grep success` in the Ray
# container, unless the operator is recent enough to probe over HTTP and the RayJob's rayVersion is 2.53 or later;
# without wget the head never becomes ready, and the RayJob stays Initializing while its nodes bill.
RUN apt-get update \
    && apt-get install -y --no-install-recommends wget \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /src
# torch first, in its own layer: it is the largest download and changes far less often than the source.
COPY constraints.txt ./
RUN pip install --index-url "${TORCH_INDEX}" -c constraints.txt torch

# The package with Ray at the pinned version (the RayJob's rayVersion, manifests.RAY_VERSION, names the same one);
# torch stays as installed.
COPY . .
RUN pip install -c constraints.txt ".[ray,atari,mujoco]"

# Root, on purpose: the key Secret is mounted root-owned with mode 0400, and the worker only trusts a key owned by
# the user it runs as. Isolation comes from the pod, not from a user inside it.
WORKDIR /home/tfcli
