"""`mate guard-run -- python ...` on CUDA PyTorch programs: run on a GPU machine only (tests/gpu,
check `guard_run_torch`), never in CI. CI runs guard-run on CPU torch programs
(GuardRunPython.*); here the preload also serves torch's cudaMalloc, on torch 2.x.

    PYTHONPATH=build/default/python python3 -m pytest -q tests/gpu/python/test_guard_run_torch.py
"""

import os
import re
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

STEP = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(64, 256, device="cuda")
y = torch.randint(0, 10, (64,), device="cuda")
for _ in range(3):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
host = torch.randn(10000).sort().values           # host memory, guarded by the preload too
print(f"{loss.item():.6f} {float(host[0]):.6f}")
"""

PAST_END = """
import cupy, torch
t = torch.zeros(64, device="cuda")                # 256 bytes
kernel = cupy.RawKernel(r'extern "C" __global__ void past(float* p, int n) { p[n] = 1.0f; }', "past")
kernel((1,), (1,), (cupy.asarray(t), cupy.int32(64)))
torch.cuda.synchronize()
print("not caught")
"""


def run(argv, env=None):
    return subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, **(env or {})), timeout=170)


def guard_run(code, *options, env=None):
    return run([sys.executable, "-m", "mate", "guard-run", *options, "--", sys.executable, "-c", code], env)


def test_a_training_step_under_guard_run_gives_the_plain_result():
    plain = run([sys.executable, "-c", STEP])
    assert plain.returncode == 0, plain.stderr
    guarded = guard_run(STEP)
    assert guarded.returncode == 0, guarded.stderr[-4000:]
    assert guarded.stdout == plain.stdout


def test_torchs_device_allocations_are_guarded():
    # Host allocations below 1 MiB left to glibc, so that the log holds the device ones.
    p = guard_run(STEP, "--log-allocations", env={"MATE_GUARD_MIN_BYTES": "1048576"})
    assert p.returncode == 0, p.stderr[-4000:]
    device = re.findall(r"mate guard: alloc #\d+ user \[0x[0-9a-f]+, 0x[0-9a-f]+\) size \d+ mode tail cuda guard", p.stderr)
    assert device, p.stderr[-4000:]


def test_a_kernel_writing_past_a_torch_tensor_is_caught_under_guard_run():
    pytest.importorskip("cupy")
    p = guard_run(PAST_END)
    assert p.returncode != 0 and "not caught" not in p.stdout, p.stdout + p.stderr[-4000:]
    assert "mate guard: device fault" in p.stderr or "illegal address" in p.stderr, p.stderr[-4000:]
