# syntax=docker/dockerfile:1
# The audiorepro image: the pinned GPU evaluation stack (torch, transformers, laion-clap) and
# audiorepro, checked by `audiorepro selfcheck` at the end of the build.
#
# BASE_IMAGE: a CUDA-enabled PyTorch image for linux/amd64 (JUWELS Booster: AMD EPYC + A100,
# x86_64) and linux/arm64 (JUPITER: GH200, aarch64; built on an x86_64 host with
# qemu-user-static and `podman build --platform linux/arm64`, see docs/hpc.md) whose Python is 3.11
# and whose torch, torchvision and torchaudio are the trio the locks pin (2.9.1, 0.24.1, 2.9.1;
# a CUDA local label such as +cu128 satisfies the pin). The default below names the tag only:
# no registry was reachable where this file was written, and a digest is never invented.
# `tools/pin-base-image` resolves the tag's digest where a registry is reachable and rewrites
# this line to TAG@sha256:DIGEST; until then `audiorepro selfcheck` and every run's manifest
# say "base image unpinned".
ARG BASE_IMAGE=docker.io/pytorch/pytorch:2.9.1-cuda12.8-cudnn9-runtime

# Stage 1, the wheel: audiorepro built by its own build (setup.py), which compiles trec-eval's
# kernels (src/audiorepro/core/_trec.c) ahead of time into the package, so that no command
# compiles anything at run time, in the image or in a read-only SIF on a fresh node. Only this
# stage has a C compiler (the base's, or Debian's/Ubuntu's gcc when the base has none); the
# image gets the wheel alone. The build backend comes from its hashed lock, as below.
FROM ${BASE_IMAGE} AS wheel
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY requirements /opt/audiorepro-build/requirements
RUN set -eu; \
    if [ -d /opt/pip-cache ] && [ -w /opt/pip-cache ]; then \
        unset PIP_NO_CACHE_DIR; export PIP_CACHE_DIR=/opt/pip-cache; \
    fi; \
    if ! command -v cc >/dev/null 2>&1; then \
        apt-get update -qq; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev; \
    fi; \
    python3 -m venv /opt/audiorepro-build/venv; \
    /opt/audiorepro-build/venv/bin/pip install --require-hashes \
        -r /opt/audiorepro-build/requirements/build.txt
COPY pyproject.toml README.md setup.py /opt/audiorepro-build/tree/
COPY src /opt/audiorepro-build/tree/src
RUN /opt/audiorepro-build/venv/bin/pip wheel --no-deps --no-build-isolation \
        --wheel-dir /opt/audiorepro-build/wheels /opt/audiorepro-build/tree

# Stage 2, the image.
FROM ${BASE_IMAGE}

ARG BASE_IMAGE
ARG VERSION=0.1.0
ARG SOURCE=https://github.com/audiorepro/audiorepro

# Determinism: cuBLAS needs a fixed workspace for deterministic algorithms; hash seeds and every
# BLAS/OpenMP pool are fixed (the last bits of CPU kernels follow the thread split); numba's
# cache (librosa's kernels, for the resemblyzer encoder; audiorepro's own, trec-eval's and the
# rank counts', are compiled into the package and need none) goes to /tmp because a SIF is
# read-only; nothing is downloaded at run time (weights and
# data come in through read-only binds).
ENV PYTHONHASHSEED=0 \
    CUBLAS_WORKSPACE_CONFIG=:4096:8 \
    OMP_NUM_THREADS=1 \
    MKL_NUM_THREADS=1 \
    OPENBLAS_NUM_THREADS=1 \
    NUMEXPR_NUM_THREADS=1 \
    AUDIOREPRO_CPU_THREADS=1 \
    NUMBA_CACHE_DIR=/tmp/audiorepro-numba \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    AUDIOREPRO_BASE_IMAGE=${BASE_IMAGE} \
    AUDIOREPRO_LOCK=/opt/audiorepro/lock.txt \
    PATH=/opt/audiorepro/venv/bin:${PATH}

# A virtual environment that sees the base image's packages: pins the base already satisfies
# (its CUDA build of the torch trio) are kept, everything else is installed from the lock of
# this architecture, with hash checking on. The build backend comes first, from its own lock,
# and builds every source distribution without build isolation, so nothing unhashed is fetched.
# A build that mounts a pip cache at /opt/pip-cache (tools/container.py mounts the host's, which
# the tox envs filled with the same pinned files) installs from it; a mount is not part of the
# image, and without one pip keeps no cache (PIP_NO_CACHE_DIR), so the layer is the same.
COPY requirements/build.txt requirements/image-linux-*.txt /opt/audiorepro/requirements/
RUN set -eu; \
    if [ -d /opt/pip-cache ] && [ -w /opt/pip-cache ]; then \
        unset PIP_NO_CACHE_DIR; export PIP_CACHE_DIR=/opt/pip-cache; \
    fi; \
    lock="/opt/audiorepro/requirements/image-linux-$(uname -m).txt"; \
    if [ ! -f "$lock" ]; then echo "no lock for $(uname -m): see tools/lock.py" >&2; exit 1; fi; \
    ln -s "$lock" /opt/audiorepro/lock.txt; \
    python3 -m venv --system-site-packages /opt/audiorepro/venv; \
    pip install --require-hashes -r /opt/audiorepro/requirements/build.txt; \
    pip install --require-hashes --no-build-isolation -r "$lock"

# What changes with every commit (the revision, in a label and the environment) comes after
# the pip layer: an ARG changes the cache key of every RUN after it, so declared above it a new
# commit rebuilt the whole ~8 GB layer; here a commit rebuilds only audiorepro's own layer.
ARG REVISION=unknown
LABEL org.opencontainers.image.title="audiorepro" \
      org.opencontainers.image.description="Re-derive published audio-embedding benchmark numbers and prove they still hold" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"

ENV AUDIOREPRO_REVISION=${REVISION}

# audiorepro itself: the wheel of stage 1 (its compiled trec-eval kernels and native trec-eval
# program included; pip keeps the program's exec bit).
COPY --from=wheel /opt/audiorepro-build/wheels /opt/audiorepro/wheels
RUN pip install --no-deps /opt/audiorepro/wheels/audiorepro-*.whl \
    && rm -rf /opt/audiorepro/wheels

RUN useradd --create-home --uid 1000 --shell /bin/sh audiorepro
USER audiorepro
WORKDIR /home/audiorepro

# The image's own check: golden values, harness vs reference, tiny-model identity, and every
# installed package against the lock.
RUN audiorepro selfcheck --strict-environment

ENTRYPOINT ["audiorepro"]
CMD ["--help"]
