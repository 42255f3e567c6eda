"""`pytest --guard-alloc` (mate.pytest_plugin) on a project of CUDA PyTorch tests: run on a GPU
machine only (tests/gpu, check `pytest_guard_cuda`), never in CI. CI checks the plugin's guard
mode on CPU tests (tests/python/test_pytest_plugin.py); here the rerun under `mate guard-run`
serves torch's CUDA allocations too.

    PYTHONPATH=build/default/python python3 -m pytest -q tests/gpu/python/test_pytest_guard_cuda.py
"""

import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

PROJECT = """
import pytest, torch

def test_matmul_on_cuda():
    a = torch.randn(128, 128, device="cuda")
    assert torch.allclose(a @ torch.eye(128, device="cuda"), a)

@pytest.mark.parametrize("use_graph", [False, True])
def test_graph_or_not(use_graph):
    x = torch.ones(4, device="cuda")
    assert float(x.sum()) == 4.0
"""


def test_guard_alloc_runs_cuda_tests_under_the_guard(tmp_path):
    (tmp_path / "test_cuda_project.py").write_text(textwrap.dedent(PROJECT))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MATE_") and k != "PYTEST_ADDOPTS"}
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "mate.pytest_plugin", "-p", "no:cacheprovider", "-rA",
                        "--guard-alloc", "test_cuda_project.py"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=170)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-4000:]
    assert "mate: guarded allocator in force, mode tail" in p.stdout, p.stdout
    assert "2 passed, 1 skipped" in p.stdout, p.stdout   # use_graph=True is skipped under the guard
