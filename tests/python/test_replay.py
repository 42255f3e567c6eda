"""Level-10 dumps of decorated Python functions, replayed with `python -m mate replay`."""

import glob
import json
import os
import re
import struct
import subprocess

import pytest

SCRIPT = """
import torch
from mate.api_logging import mate_api
from mylib import ops

@mate_api
def scaled_add(x, y, alpha=1.0, *, transpose=False):
    out = x + alpha * y
    return out.t() if transpose else out

@mate_api(outputs=("out",))
def write_into(x, out, scale=2):
    out.copy_(x * scale)

@mate_api
def pair(x, dtype=torch.float64):
    return x.to(dtype) * 2, int(x.numel())

if __name__ == "__main__":
    a = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    b = torch.ones(3, 2).t()                       # transposed: non-contiguous
    scaled_add(a, b, 2.0, transpose=True)
    write_into(a[:, 1:], torch.empty(2, 2))        # a slice with a storage offset
    pair(a.to(torch.bfloat16))
    ops.rms(torch.linspace(-1, 1, 8), eps=1e-5)
"""

MODULE = """
import torch
from mate.api_logging import mate_api

class ops:
    @staticmethod
    @mate_api(name="mylib.rms")
    def rms(x, eps=1e-6):
        return x / torch.sqrt((x * x).mean() + eps)
"""


def dump(run_python, tmp_path, env=None):
    (tmp_path / "mylib.py").write_text(MODULE)
    dumps = tmp_path / "dumps"
    run_python(SCRIPT, env={"MATE_LOGLEVEL": "10", "MATE_DUMP_DIR": str(dumps), **(env or {})})
    return dumps


def test_python_calls_replay_and_pass(run_python, run_mate_module, tmp_path):
    dumps = dump(run_python, tmp_path)
    calls = sorted(glob.glob(str(dumps / "*")))
    assert len(calls) == 4
    first = json.load(open(os.path.join(calls[0], "call.json")))
    assert first["python"] == {"function": "__main__:scaled_add", "script": str(tmp_path / "script.py")}
    rms = json.load(open(os.path.join(calls[3], "call.json")))
    assert rms["function"] == "mylib.rms" and rms["python"]["function"] == "mylib:ops.rms"
    p = run_mate_module("replay", "--dir", str(dumps))
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines()[-1] == "4 passed, 0 failed"
    j = run_mate_module("replay", "--dir", str(dumps), "--json", "--filter", "pair")
    assert j.returncode == 0, j.stdout + j.stderr
    assert '"passed"' in j.stdout


def test_a_tampered_output_fails_with_exit_1(run_python, run_mate_module, tmp_path):
    # safetensors: the data are the file's last bytes, so the tampering is easy to place.
    dumps = dump(run_python, tmp_path, env={"MATE_DUMP_SAFETENSORS": "1"})
    [call] = glob.glob(str(dumps / "*_scaled_add"))
    record = json.load(open(os.path.join(call, "call.json")))
    out_file = os.path.join(call, record["outputs"][0]["file"])
    data = bytearray(open(out_file, "rb").read())
    data[-4:] = struct.pack("<f", 1000.0)  # the last element
    open(out_file, "wb").write(bytes(data))
    p = run_mate_module("replay", "--dir", str(dumps))
    assert p.returncode == 1
    assert "scaled_add  mismatch" in p.stdout and "3 passed, 1 failed" in p.stdout


def test_mate_program_says_how_to_replay_python_calls(run_python, tmp_path, mate_bin):
    dumps = dump(run_python, tmp_path)
    p = subprocess.run([mate_bin, "replay", "--dir", str(dumps)], capture_output=True, text=True)
    assert p.returncode == 1
    assert "was logged from Python (__main__:scaled_add): replay it with `python -m mate replay --dir" in p.stdout


def test_a_function_gone_from_the_code_is_a_clear_error(run_python, run_mate_module, tmp_path):
    dumps = dump(run_python, tmp_path)
    (tmp_path / "mylib.py").write_text("class ops:\n    pass\n")
    p = run_mate_module("replay", "--dir", str(dumps), "--filter", "mylib.*")
    assert p.returncode == 1
    assert "mylib:ops.rms: rms not found (has the code changed since the dump?)" in p.stdout


def test_dumped_tensors_open_with_torch_load_keeping_their_strides(run_python, tmp_path):
    dumps = dump(run_python, tmp_path)
    [call] = glob.glob(str(dumps / "*_scaled_add"))
    record = json.load(open(os.path.join(call, "call.json")))
    assert record["tensor_format"] == "torch_save"
    y = next(a for a in record["inputs"] if a["name"] == "y")
    p = run_python(f"""
        import torch, zipfile
        path = {os.path.join(call, y["file"])!r}
        t = torch.load(path, weights_only=True)
        print(tuple(t.shape), t.stride(), t.is_contiguous(), bool((t == torch.ones(3, 2).t()).all()))
        print(zipfile.ZipFile(path).testzip())
    """, script_name="load.py")
    shape_line, crc_line = p.stdout.splitlines()
    assert shape_line == "(2, 3) (1, 2) False True"
    assert crc_line == "None"


def test_element_sizes_are_the_cpp_cores():
    from mate import _mate
    sizes = {name: _mate.element_size(name) for name in ("f64", "f32", "bf16", "f8e5m2", "i16", "u64", "bool")}
    assert sizes == {"f64": 8, "f32": 4, "bf16": 2, "f8e5m2": 1, "i16": 2, "u64": 8, "bool": 1}
    with pytest.raises(ValueError, match=r'unknown dtype "float32" \(MATE\'s dtype names: f64, f32, .*bool\)'):
        _mate.element_size("float32")


def test_a_dtype_this_torch_lacks_is_a_clear_error():
    """A recorded narrow float this torch has no dtype for: an error naming it, not a KeyError."""
    import ctypes
    import torch
    from mate import _mate, _replay
    buffer = (ctypes.c_uint8 * 4)()
    base = ctypes.addressof(buffer)
    for dtype, torch_name in (("f8e4m3", "float8_e4m3fn"), ("dlpack(code=17,bits=4,lanes=2)", "float4_e2m1fn_x2")):
        if hasattr(torch, torch_name):
            t = _replay.tensor_over(base, 4, 0, dtype, [4], [1], "cpu")
            assert t.dtype == getattr(torch, torch_name) and t.shape == (4,)
            continue
        with pytest.raises(RuntimeError, match=rf"dtype {re.escape(dtype)} cannot be rebuilt for Python: this "
                                               rf"torch \(.*\) has no torch\.{torch_name}"):
            _replay.tensor_over(base, 4, 0, dtype, [4], [1], "cpu")
    assert _mate.element_size("dlpack(code=17,bits=4,lanes=2)") == 1  # two packed fp4 values a byte
