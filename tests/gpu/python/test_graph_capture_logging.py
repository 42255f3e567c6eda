"""API logging at levels 5 and 10 while PyTorch captures a CUDA graph: run on a GPU machine only
(tests/gpu, check `graph_capture_logging`), never in CI. CI covers the same logic through the fake
driver's capture state; this is the real driver's cuStreamIsCapturing and a real capture.

    PYTHONPATH=build/default/python python3 -m pytest -q tests/gpu/python/test_graph_capture_logging.py

What must hold (docs/logging.md, "Graph capture"): a decorated call inside `torch.cuda.graph`
reads no device memory (a synchronous copy would invalidate the capture), so the graph is
instantiated and replays; its record says why its device tensors have no statistics or data; a
call outside the capture keeps its statistics.
"""

import glob
import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

SCRIPT = """
    import torch
    from mate.api_logging import mate_api

    @mate_api(outputs=("out",))
    def double_into(x, out):
        out.copy_(x * 2)

    x = torch.arange(16, dtype=torch.float32, device="cuda")
    out = torch.empty_like(x)
    double_into(x, out)                  # outside any capture: statistics / data are read
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):            # a capture on torch's side stream (global mode)
        double_into(x, out)
    x.fill_(3.0)
    g.replay()
    torch.cuda.synchronize()
    print("replayed", out[0].item(), out[15].item())
"""


def run(env):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT)], capture_output=True, text=True,
                          env=dict(os.environ, **env), timeout=300)


def test_level_5_inside_a_capture_reads_no_device_memory_and_the_graph_replays(tmp_path):
    log = tmp_path / "log.txt"
    p = run({"MATE_LOGLEVEL": "5", "MATE_LOGDEST": str(log)})
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["replayed", "6.0", "6.0"], p.stdout + p.stderr
    text = log.read_text()
    # The first call: inputs x and out, output out, each with real statistics of the device data.
    assert "stats: min 0 max 15 mean 7.5 nan 0 inf 0" in text, text
    assert "stats: min 0 max 30 mean 15 nan 0 inf 0" in text, text
    # The captured call: its three device tensor lines (x, out in; out after) say why.
    assert text.count("stats skipped: CUDA graph capture in progress") == 3, text


def test_level_10_dump_of_a_captured_call_holds_metadata_and_says_why(tmp_path):
    dumps = tmp_path / "dumps"
    p = run({"MATE_LOGLEVEL": "10", "MATE_DUMP_DIR": str(dumps), "MATE_LOGDEST": str(tmp_path / "log.txt")})
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["replayed", "6.0", "6.0"], p.stdout + p.stderr
    calls = sorted(glob.glob(str(dumps / "*double_into")))
    assert len(calls) == 2, calls
    first, captured = (json.load(open(os.path.join(c, "call.json"))) for c in calls)
    assert first["status"] == captured["status"] == "completed", (first, captured)
    tensors = lambda call: [a for a in call["inputs"] + call["outputs"] if a["kind"] == "tensor"]
    assert len(tensors(first)) == 3 and len(tensors(captured)) == 3, (first, captured)
    assert all("file" in a and "error" not in a for a in tensors(first)), first
    for a in tensors(captured):
        assert "file" not in a, a
        assert a["error"] == "not read: CUDA graph capture in progress", a
