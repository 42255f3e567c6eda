"""Newer PyTorch's narrow dtypes through the Python face: logged, dumped at level 10, opened with
torch.load and replayed. Run on the GPU machine (tests/gpu, check `torch2_dtypes`): its PyTorch 2.x
has these dtypes, Debian's python3-torch (1.13, CI) does not, so CI only covers the clear error
for a dtype the installed torch lacks (tests/python/test_replay.py).

    PYTHONPATH=build/default/python python3 -m pytest -q tests/gpu/python/test_torch2_dtypes.py

Host and CUDA tensors of each dtype this torch has: float8_e4m3fn, float8_e5m2 (MATE's f8e4m3 /
f8e5m2), float8_e4m3fnuz, float8_e5m2fnuz, float8_e8m0fnu and float4_e2m1fn_x2 (DLPack 1.1 codes
11, 13, 14, 17). Bit patterns 0..31 are ordinary finite values in every one of them.
"""

import glob
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

NAMES = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2"]
PRESENT = [n for n in NAMES if hasattr(torch, n)]

SCRIPT = """
import sys
import torch
from mate.api_logging import mate_api

@mate_api
def reversed_bytes(x):
    # Ops on these dtypes are few; a byte view is enough to compute something checkable.
    return x.view(torch.uint8).flip(-1).view(x.dtype)

if __name__ == "__main__":
    for name in sys.argv[1:]:
        bits = torch.arange(32, dtype=torch.uint8).reshape(4, 8)
        reversed_bytes(bits.view(getattr(torch, name)))
        reversed_bytes(bits.cuda().view(getattr(torch, name)))
    torch.cuda.synchronize()
"""


def run(args, env, cwd):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd,
                          env=dict(os.environ, **env), timeout=300)


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    if not PRESENT:
        pytest.skip(f"torch {torch.__version__} has none of {NAMES}")
    where = tmp_path_factory.mktemp("dtypes")
    (where / "script.py").write_text(SCRIPT)
    p = run(["script.py", *PRESENT], {"MATE_LOGLEVEL": "10", "MATE_DUMP_DIR": str(where / "dumps"),
                                      "MATE_LOGDEST": str(where / "log.txt")}, where)
    assert p.returncode == 0, p.stdout + p.stderr
    return where / "dumps"


def test_every_call_was_dumped_with_its_dtype(dumps):
    calls = sorted(glob.glob(str(dumps / "*reversed_bytes")))
    assert len(calls) == 2 * len(PRESENT), (calls, PRESENT)
    for path in calls:
        record = json.load(open(os.path.join(path, "call.json")))
        assert record["status"] == "completed", record
        [x] = record["inputs"]
        assert "file" in x and "error" not in x, x


def test_dumped_tensors_load_with_torch_load_as_their_bytes(dumps):
    # These dtypes are stored as raw bytes (a 1-D uint8 tensor of the extent: one file must open
    # in torch 1.13 too; docs/reference/dump-format.md), their dtype and shape in call.json.
    calls = sorted(glob.glob(str(dumps / "*reversed_bytes")))
    expected = torch.arange(32, dtype=torch.uint8).reshape(4, 8)
    for i, path in enumerate(calls):
        name = PRESENT[i // 2]
        record = json.load(open(os.path.join(path, "call.json")))
        [x_arg] = record["inputs"]
        assert x_arg["shape"] == [4, 8] and x_arg["strides"] == [8, 1], (name, x_arg)
        x = torch.load(os.path.join(path, x_arg["file"]))  # weights_only by default on torch 2.6+
        assert x.dtype == torch.uint8 and torch.equal(x, expected.flatten()), (name, x)
        assert x.view(getattr(torch, name)).numel() == 32, name
        out = next(a for a in record["outputs"] if a["name"] == "return")
        y = torch.load(os.path.join(path, out["file"]))
        assert torch.equal(y, expected.flip(-1).flatten()), (name, y)


def test_the_calls_replay_and_pass(dumps):
    p = run(["-m", "mate", "replay", "--dir", str(dumps)], {}, dumps.parent)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines()[-1] == f"{2 * len(PRESENT)} passed, 0 failed", p.stdout
