"""python -m mate replay of Python calls on CUDA tensors: run on a GPU machine only (tests/gpu,
check `python_replay_cuda`), never in CI (no CUDA there).

    PYTHONPATH=build/default/python python3 -m pytest -q tests/gpu/python/test_replay_cuda.py

Replay rebuilds each CUDA tensor in device memory through MATE's device layer and hands the
function a torch tensor over it (docs/python.md); the outputs are compared after the call.
"""

import glob
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

SCRIPT = """
import torch
from mate.api_logging import mate_api

@mate_api(outputs=("out",))
def scale_into(x, out, alpha=3.0):
    assert x.is_cuda and out.is_cuda, (x.device, out.device)
    out.copy_(x * alpha)

@mate_api
def softmax_rows(x):
    assert x.is_cuda and not x.is_contiguous()    # replay restores the transposed layout
    return torch.softmax(x, dim=-1)

if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(64, 32, device="cuda")
    out = torch.empty_like(x)
    scale_into(x, out)
    softmax_rows(x.t())
    torch.cuda.synchronize()
"""


def run(args, cwd, env=None):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd,
                          env=dict(os.environ, **(env or {})), timeout=300)


@pytest.fixture
def dumped(tmp_path):
    (tmp_path / "script.py").write_text(SCRIPT)
    p = run(["script.py"], tmp_path, {"MATE_LOGLEVEL": "10", "MATE_DUMP_DIR": str(tmp_path / "dumps"),
                                      "MATE_LOGDEST": str(tmp_path / "log.txt")})
    assert p.returncode == 0, p.stdout + p.stderr
    assert len(glob.glob(str(tmp_path / "dumps" / "*"))) == 2
    return tmp_path


def test_cuda_calls_replay_on_the_device_and_pass(dumped):
    p = run(["-m", "mate", "replay", "--dir", "dumps"], dumped)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines()[-1] == "2 passed, 0 failed", p.stdout


def test_changed_code_is_a_mismatch(dumped):
    script = dumped / "script.py"
    script.write_text(SCRIPT.replace("out.copy_(x * alpha)", "out.copy_(x * alpha + 1e-3)"))
    p = run(["-m", "mate", "replay", "--dir", "dumps"], dumped)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "scale_into  mismatch: out: 2048 of 2048 elements differ" in p.stdout, p.stdout
    assert p.stdout.splitlines()[-1] == "1 passed, 1 failed", p.stdout
