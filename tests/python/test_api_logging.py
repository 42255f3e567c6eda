"""mate.api_logging: the decorator logs Python calls exactly as MATE_API logs C++ calls."""

import glob
import json
import os
import struct
import subprocess

from conftest import json_records

FUNCTIONS = """
import enum, os, sys
import numpy as np
import torch
from mate.api_logging import mate_api

class Color(enum.Enum):
    RED = 1

@mate_api
def every_kind(t, strided, flag, i, big, x, s, none, dtype, color, arr, items, table, grad, mask, thing):
    return t * 2

@mate_api(name="mylib.fill", outputs=("out",))
def fill(out, value=3.0):
    out.fill_(value)

@mate_api
def boom(x):
    raise ValueError("x must be positive")

@mate_api
def crash(x):
    sys.stdout.flush()
    os.abort()
"""

CALLS = FUNCTIONS + """
t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
every_kind(t, t.t(), True, -7, 2**63 + 5, 0.5, "text", None, torch.bfloat16, Color.RED,
           np.arange(4, dtype=np.int16), [1, 2.5, "a"], {"k": 1}, torch.ones(2, requires_grad=True),
           torch.zeros(3, dtype=torch.bool), object())
fill(torch.empty(4))
try:
    boom(t)
except ValueError as e:
    print("re-raised:", e)
"""


def test_level_0_returns_the_function_itself(run_python):
    p = run_python("""
        from mate.api_logging import mate_api
        def f(x):
            return x
        print(mate_api(f) is f, mate_api(name="g")(f) is f, mate_api(outputs=("x",))(f) is f)
    """)
    assert p.stdout.split() == ["True", "True", "True"]


def test_level_1_one_line_per_call(run_python, tmp_path):
    log = tmp_path / "log.txt"
    run_python(CALLS, env={"MATE_LOGLEVEL": "1", "MATE_LOGDEST": str(log)})
    lines = log.read_text().splitlines()
    assert len(lines) == 3, lines
    assert lines[0].endswith("every_kind") and lines[1].endswith("mylib.fill") and lines[2].endswith("boom")


def test_level_3_every_argument_kind(run_python, tmp_path):
    log = tmp_path / "log.json"
    p = run_python(CALLS, env={"MATE_LOGLEVEL": "3", "MATE_LOGDEST": str(log), "MATE_LOGFORMAT": "json"})
    assert "re-raised: x must be positive" in p.stdout
    records = json_records(log)
    inputs = {a["name"]: a for a in records[0]["args"]}
    assert records[0]["event"] == "inputs" and records[0]["fn"] == "every_kind"
    assert inputs["t"]["kind"] == "tensor" and inputs["t"]["dtype"] == "f32" and inputs["t"]["shape"] == [2, 3]
    assert inputs["strided"]["strides"] == [1, 3] and inputs["strided"]["contiguous"] is False
    assert inputs["strided"]["va"] == inputs["t"]["va"]  # the same memory
    assert inputs["flag"] == {"name": "flag", "kind": "bool", "type": "bool", "value": True}
    assert inputs["i"]["kind"] == "int" and inputs["i"]["value"] == -7
    assert inputs["big"]["kind"] == "uint" and inputs["big"]["value"] == 2**63 + 5
    assert inputs["x"]["kind"] == "float" and inputs["x"]["value"] == 0.5
    assert inputs["s"]["value"] == "text"
    assert inputs["none"]["kind"] == "none"
    assert inputs["dtype"]["type"] == "torch.dtype" and inputs["dtype"]["value"] == "torch.bfloat16"
    assert inputs["color"]["kind"] == "enum" and inputs["color"]["value"] == 1 and inputs["color"]["label"] == "Color.RED"
    assert inputs["arr"]["kind"] == "tensor" and inputs["arr"]["dtype"] == "i16" and inputs["arr"]["shape"] == [4]
    assert [x["value"] for x in inputs["items"]["items"]] == [1, 2.5, "a"]
    assert inputs["table"]["type"] == "dict" and inputs["table"]["items"][0]["name"] == "['k']"
    assert inputs["grad"]["kind"] == "tensor"  # DLPack export would refuse it: MATE does not use it
    assert inputs["mask"]["kind"] == "tensor" and inputs["mask"]["dtype"] == "bool"
    assert inputs["thing"]["type"] == "object:object" and inputs["thing"]["value"].startswith("<object object")
    assert records[1]["event"] == "outputs" and records[1]["args"][0]["name"] == "return"
    fill_out = [r for r in records if r["fn"] == "mylib.fill" and r["event"] == "outputs"][0]
    assert [a["name"] for a in fill_out["args"]] == ["out"]
    raised = [r for r in records if r["fn"] == "boom" and r["event"] == "exception"][0]
    assert raised["exception"] == {"type": "ValueError", "message": "x must be positive"}


def test_level_5_statistics(run_python, tmp_path):
    log = tmp_path / "log.json"
    run_python(CALLS, env={"MATE_LOGLEVEL": "5", "MATE_LOGDEST": str(log), "MATE_LOGFORMAT": "json"})
    records = json_records(log)
    t = records[0]["args"][0]
    assert t["stats"]["min"] == 0.0 and t["stats"]["max"] == 5.0 and t["stats"]["mean"] == 2.5
    ret = records[1]["args"][0]
    assert ret["stats"]["max"] == 10.0


def test_level_5_statistics_count_subnormals_under_flush_denormal(run_python, tmp_path):
    # torch.set_flush_denormal(True) sets FTZ/DAZ (for the calling thread); the statistics are
    # computed with the mode cleared (and it is set again after: the assert below).
    log = tmp_path / "log.json"
    run_python("""
import torch
from mate.api_logging import mate_api

@mate_api
def tiny(h, f):
    return None

assert torch.set_flush_denormal(True)
h = torch.ones(64, dtype=torch.int16).view(torch.float16)              # 2^-24, f16's smallest
f = torch.full((64,), 0x000116C2, dtype=torch.int32).view(torch.float32)  # ~1e-40, an f32 denormal
tiny(h, f)
assert (f * 1).eq(0).all(), "flush-to-zero is the process's mode again after the call"
""", env={"MATE_LOGLEVEL": "5", "MATE_LOGDEST": str(log), "MATE_LOGFORMAT": "json"})
    h, f = json_records(log)[0]["args"]
    assert h["stats"]["min"] == h["stats"]["max"] == h["stats"]["mean"] == 2.0**-24
    denormal = struct.unpack("<f", struct.pack("<I", 0x000116C2))[0]
    assert f["stats"]["min"] == f["stats"]["max"] == denormal


def test_records_have_the_fields_of_a_cpp_call(run_python, tmp_path, ops_demo):
    py_log, cpp_log = tmp_path / "py.json", tmp_path / "cpp.json"
    run_python(CALLS, env={"MATE_LOGLEVEL": "3", "MATE_LOGDEST": str(py_log), "MATE_LOGFORMAT": "json"})
    env = dict(os.environ, MATE_LOGLEVEL="3", MATE_LOGDEST=str(cpp_log), MATE_LOGFORMAT="json")
    subprocess.run([ops_demo], env=env, check=True, capture_output=True)
    py, cpp = json_records(py_log), json_records(cpp_log)
    for event in ("inputs", "outputs"):
        py_rec = next(r for r in py if r["event"] == event)
        cpp_rec = next(r for r in cpp if r["event"] == event)
        assert set(py_rec) == set(cpp_rec), event
        py_tensor = next(a for a in py_rec["args"] if a["kind"] == "tensor")
        cpp_tensor = next(a for a in cpp_rec["args"] if a["kind"] == "tensor")
        assert set(py_tensor) == set(cpp_tensor)


def test_logdest_with_pid(run_python, tmp_path):
    p = run_python(CALLS + "print(os.getpid())", env={"MATE_LOGLEVEL": "3", "MATE_LOGDEST": str(tmp_path / "log_%i.txt")})
    pid = p.stdout.split()[-1]
    assert "every_kind inputs" in (tmp_path / f"log_{pid}.txt").read_text()


def test_exception_is_reraised_unchanged(run_python):
    p = run_python(FUNCTIONS + """
import torch
err = ValueError("mine")
@mate_api
def raiser():
    raise err
try:
    raiser()
except ValueError as e:
    print(e is err)
""", env={"MATE_LOGLEVEL": "3", "MATE_LOGDEST": "stderr"})
    assert p.stdout.strip() == "True"
    assert "raiser exception" in p.stderr and "ValueError: mine" in p.stderr


def test_a_crash_in_the_body_keeps_the_inputs_in_log_and_dump(run_python, tmp_path):
    log, dumps = tmp_path / "log.txt", tmp_path / "dumps"
    p = run_python(FUNCTIONS + """
crash(torch.arange(5, dtype=torch.float32))
""", env={"MATE_LOGLEVEL": "10", "MATE_LOGDEST": str(log), "MATE_DUMP_DIR": str(dumps)}, check=False)
    assert p.returncode != 0
    text = log.read_text()
    assert "crash inputs" in text and "x: tensor f32 [5]" in text
    [call_dir] = glob.glob(str(dumps / "*_crash"))
    call = json.load(open(os.path.join(call_dir, "call.json")))
    assert call["status"] == "inputs_saved"
    assert call["python"]["function"] == "__main__:crash"
    assert os.path.isfile(os.path.join(call_dir, call["inputs"][0]["file"]))


def test_reconfigure_reads_the_variables_again(run_python, tmp_path):
    log = tmp_path / "log.txt"
    p = run_python(f"""
        import os
        import mate.api_logging as al
        print(al.level())
        os.environ["MATE_LOGLEVEL"] = "3"
        os.environ["MATE_LOGDEST"] = {str(log)!r}
        al.reconfigure()
        @al.mate_api
        def f(x):
            return x + 1
        f(1)
        print(al.level())
    """)
    assert p.stdout.split() == ["0", "3"]
    assert "f inputs" in log.read_text()
