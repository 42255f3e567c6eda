"""Checks a level-10 dump of sample.mixed (sample_producer mixed) with torch itself.

usage: check_torch_load.py CALL_DIR EXPECTED_JSON

Every tensor file must be a valid zip (zipfile.testzip(): torch 1.13 ignores CRCs), with its
data 64-byte aligned, and open with torch.load(weights_only=True). Tensors torch can express
come back with call.json's dtype, shape and strides (transposed and sliced ones non-contiguous)
and the values the producer printed; the others (u32, a negative stride) come back as the raw
bytes of their extent, which the recorded layout turns into the same values.
"""
import json
import os
import struct
import sys
import zipfile

import numpy as np
import torch

TORCH = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i8": torch.int8,
         "bool": torch.bool, "u8": torch.uint8, "i16": torch.int16, "i32": torch.int32,
         "i64": torch.int64, "f64": torch.float64}
NUMPY = {"u32": "<u4", "f32": "<f4", "u16": "<u2", "u64": "<u8"}


def check_zip(path):
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None, path + ": a CRC-32 does not match"
        names = z.namelist()
        for want in ("data.pkl", "byteorder", "version", ".data/serialization_id", "data/0"):
            assert "archive/" + want in names, (path, want, names)
        assert z.read("archive/byteorder") == b"little"
        with open(path, "rb") as f:
            for info in z.infolist():
                assert info.compress_type == zipfile.ZIP_STORED, (path, info.filename)
                f.seek(info.header_offset)
                header = f.read(30)
                name_len, extra_len = struct.unpack("<HH", header[26:30])
                data_at = info.header_offset + 30 + name_len + extra_len
                assert data_at % 64 == 0, (path, info.filename, data_at)


def raw_values(raw, arg):
    """The values of a raw-bytes tensor, from the layout call.json records."""
    dt = np.dtype(NUMPY[arg["dtype"]])
    shape, strides = arg["shape"], arg["strides"]
    begin = sum(min(0, (n - 1) * s) for n, s in zip(shape, strides)) * dt.itemsize
    a = np.ndarray(shape, dtype=dt, buffer=raw, offset=-begin, strides=[s * dt.itemsize for s in strides])
    return a.flatten().tolist()


def main():
    call_dir, expected_path = sys.argv[1], sys.argv[2]
    with open(expected_path) as f:
        expected = json.load(f)
    with open(os.path.join(call_dir, "call.json")) as f:
        call = json.load(f)
    assert call["tensor_format"] == "torch_save", call["tensor_format"]
    args = {a["name"]: a for a in call["inputs"]}
    checked = 0
    for name, values in expected.items():
        arg = args[name]
        path = os.path.join(call_dir, arg["file"])
        assert path.endswith(".pt"), path
        check_zip(path)
        t = torch.load(path, weights_only=True)
        assert isinstance(t, torch.Tensor), (path, type(t))
        raw = arg["dtype"] not in TORCH or any(s < 0 for s in arg["strides"])
        if raw:
            assert t.dtype == torch.uint8 and t.dim() == 1, (path, t.dtype, t.shape)
            got = raw_values(t.numpy().tobytes(), arg)
        else:
            assert t.dtype == TORCH[arg["dtype"]], (path, t.dtype)
            assert list(t.shape) == arg["shape"], (path, list(t.shape))
            assert list(t.stride()) == arg["strides"], (path, t.stride(), arg["strides"])
            assert t.storage_offset() == 0, (path, t.storage_offset())
            assert t.is_contiguous() == arg["contiguous"], (path, t.is_contiguous())
            got = t.flatten().tolist()
        got = [float(v) for v in got]
        assert got == [float(v) for v in values], (path, got, values)
        checked += 1
    out = next(a for a in call["outputs"] if a["name"] == "out")
    check_zip(os.path.join(call_dir, out["file"]))
    assert torch.load(os.path.join(call_dir, out["file"]), weights_only=True).shape == (9,)
    print("ok: %d tensors (torch %s)" % (checked, torch.__version__))


if __name__ == "__main__":
    main()
