#!/usr/bin/env bash
# For a machine with an NVIDIA GPU, in about five minutes: the GPU tests, the Sinkhorn and
# training-step benchmark tables (CPU and CUDA), and the estimated training time of
# `make book PROFILE=full` on this GPU.
#     bash benchmarks/gpu_check.sh          (after `make test` has created .venv; see README)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'torch sees no CUDA \
device: install a CUDA build of torch==2.13.0 (README, section GPU)')"
"$PY" -c "import torch; print(torch.__version__, torch.cuda.get_device_name())"
"$PY" -m pytest -q -m "" tests/test_cuda.py tests/test_normalizations.py
"$PY" benchmarks/sinkhorn.py --repeats 10
"$PY" benchmarks/train_step.py --repeats 10
"$PY" benchmarks/full_profile_estimate.py --steps 5 --device cuda
