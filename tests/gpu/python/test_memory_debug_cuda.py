"""mate.memory_debug on CUDA PyTorch (2.x): run on a GPU machine only (tests/gpu), never in CI.

    PYTHONPATH=build/default/python python3 -m pytest -q tests/gpu/python

Each case runs in a child process: a guard fault ends the process (CUDA error 700 is sticky).
"""

import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)


def run(code):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=dict(os.environ), timeout=300)


def test_install_then_a_clean_step_matches_the_unguarded_one():
    p = run("""
        import torch
        from mate.memory_debug import GuardAllocatorConfig, install_guard_allocator, installed_config, describe
        install_guard_allocator(GuardAllocatorConfig(mode="tail"))
        install_guard_allocator(GuardAllocatorConfig(mode="tail"))   # the same: ignored
        torch.manual_seed(0)
        model = torch.nn.Linear(64, 32).cuda()
        x = torch.randn(8, 64, device="cuda")
        loss = model(x).square().mean()
        loss.backward()
        print(installed_config().mode, describe(x)["size"], f"{loss.item():.6f}")
    """)
    assert p.returncode == 0, p.stderr
    mode, size, loss = p.stdout.split()
    assert mode == "tail" and int(size) == 8 * 64 * 4
    plain = run("""
        import torch
        torch.manual_seed(0)
        model = torch.nn.Linear(64, 32).cuda()
        x = torch.randn(8, 64, device="cuda")
        print(f"{model(x).square().mean().item():.6f}")
    """)
    assert plain.stdout.strip() == loss


def test_after_the_first_allocation_install_is_refused():
    p = run("""
        import torch
        from mate.memory_debug import install_guard_allocator, GuardError
        torch.zeros(4, device="cuda")
        try:
            install_guard_allocator()
        except GuardError as e:
            print(e)
    """)
    assert "Guard allocator must be installed before the first CUDA allocation in the process" in p.stdout


def test_a_kernel_writing_past_a_tensor_is_caught():
    pytest.importorskip("cupy")
    p = run("""
        import cupy, torch
        from mate.memory_debug import install_guard_allocator
        install_guard_allocator()
        t = torch.zeros(64, device="cuda")                 # 256 bytes: ends at the guard
        kernel = cupy.RawKernel(r'extern "C" __global__ void past(float* p, int n) { p[n] = 1.0f; }', "past")
        kernel((1,), (1,), (cupy.asarray(t), cupy.int32(64)))
        torch.cuda.synchronize()
    """)
    assert p.returncode != 0
    assert "guard" in (p.stdout + p.stderr).lower()
