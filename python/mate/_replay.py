"""The Python side of replaying dumped Python calls (python -m mate replay; the C++ replay calls
these from bindings/replay.cpp): import the recorded function, wrap rebuilt memory as tensors,
call with the recorded arguments."""

import ctypes
import importlib
import inspect
import os
import re
import runpy
import sys

from . import _mate

# MATE's dtype names -> torch's (those this torch has; others come back as numpy arrays).
_TORCH_DTYPES = {
    "f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16",
    "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2",
    "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "bool": "bool",
    # Newer torch's narrow floats, as the Python face records them (DLPack 1.1's codes).
    "dlpack(code=11,bits=8,lanes=1)": "float8_e4m3fnuz", "dlpack(code=13,bits=8,lanes=1)": "float8_e5m2fnuz",
    "dlpack(code=14,bits=8,lanes=1)": "float8_e8m0fnu", "dlpack(code=17,bits=4,lanes=2)": "float4_e2m1fn_x2",
}
_NUMPY_DTYPES = {"u16": "uint16", "u32": "uint32", "u64": "uint64"}

_scripts = {}


def load_function(python_function, script):
    """The function call.json names ("module:qualname"; a script's path for __main__)."""
    module_name, _, qualname = python_function.partition(":")
    if module_name == "__main__":
        if not script:
            raise RuntimeError(f"{python_function} was defined in a __main__ whose file is unknown "
                               "(an interactive session or python -c): it cannot be imported again")
        if not os.path.isfile(script):
            raise RuntimeError(f"{python_function} was defined in the script {script}, which no longer exists")
        namespace = _scripts.get(script)
        if namespace is None:
            # The script's own directory first on sys.path, as when it ran. Its top level runs
            # again (as "__mate_replay__", so an `if __name__ == "__main__":` block does not).
            sys.path.insert(0, os.path.dirname(script))
            namespace = runpy.run_path(script, run_name="__mate_replay__")
            _scripts[script] = namespace
        obj, parts = None, qualname.split(".")
        if parts[0] not in namespace:
            raise RuntimeError(f"the script {script} defines no {parts[0]} (recorded as {python_function})")
        obj = namespace[parts[0]]
        parts = parts[1:]
    else:
        obj = importlib.import_module(module_name)
        parts = qualname.split(".")
    for part in parts:
        if part == "<locals>":
            raise RuntimeError(f"{python_function} is defined inside another function: it cannot be imported")
        if not hasattr(obj, part):
            raise RuntimeError(f"{python_function}: {part} not found (has the code changed since the dump?)")
        obj = getattr(obj, part)
    return obj


class _CudaMemory:
    """`nbytes` of CUDA memory at `base` as the CUDA array interface describes it, which
    torch.as_tensor wraps without a copy."""

    def __init__(self, base, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (base, False), "strides": None,
                                        "version": 2}


def _cuda_bytes(base, nbytes, device):
    """A torch.uint8 tensor over CUDA memory MATE's device layer rebuilt (on the tensor's device,
    in its primary context, the one the CUDA runtime and so torch use)."""
    import torch
    if nbytes == 0:
        return torch.empty(0, dtype=torch.uint8, device=device)
    flat = torch.as_tensor(_CudaMemory(base, nbytes))  # torch takes the device from the pointer
    # Never a copy: the function must write the memory replay reads back.
    if flat.data_ptr() != base or flat.device != torch.device(device):
        raise RuntimeError(f"the {device} memory rebuilt at {base:#x} came back from torch as {flat.device} "
                           f"at {flat.data_ptr():#x}: not replayed on a copy")
    return flat


def tensor_over(base, nbytes, offset_bytes, dtype, shape, strides, device):
    """A tensor over rebuilt memory: `nbytes` at `base`, the tensor `offset_bytes` into it, on
    `device` ("cpu" or "cuda:N")."""
    on_cuda = re.fullmatch(r"cuda:\d+", device) is not None
    if device != "cpu" and not on_cuda:
        raise RuntimeError(f"replaying a Python call on a {device} tensor from Python is not supported yet: "
                           "run the call's replay on the host or use mate replay with a C++ registration")
    if dtype not in _TORCH_DTYPES:
        raise RuntimeError(f"a tensor of dtype {dtype} cannot be rebuilt for Python")
    item = _mate.element_size(dtype)
    import torch
    torch_name = _TORCH_DTYPES.get(dtype)
    if torch_name is not None and hasattr(torch, torch_name):
        if on_cuda:
            flat = _cuda_bytes(base, nbytes, device)
        else:
            flat = torch.frombuffer((ctypes.c_uint8 * max(nbytes, 1)).from_address(base), dtype=torch.uint8)[:nbytes]
        return flat.view(getattr(torch, torch_name)).as_strided(shape, strides, offset_bytes // item)
    if on_cuda or dtype not in _NUMPY_DTYPES:  # numpy stands in for torch on the host only
        raise RuntimeError(f"a {device} tensor of dtype {dtype} cannot be rebuilt for Python: this torch "
                           f"({torch.__version__}) has no torch.{torch_name}")
    buffer = (ctypes.c_uint8 * max(nbytes, 1)).from_address(base)
    import numpy
    flat = numpy.frombuffer(buffer, dtype=numpy.uint8)[:nbytes].view(numpy.dtype(_NUMPY_DTYPES[dtype]))
    return numpy.lib.stride_tricks.as_strided(flat[offset_bytes // item:], shape, [s * item for s in strides])


def call_function(function, names, values):
    """Calls `function` with the recorded arguments (names as call.json records them)."""
    signature = inspect.signature(function)
    args, kwargs = [], {}
    for name, value in zip(names, values):
        p = signature.parameters.get(name)
        if p is None:
            raise RuntimeError(f"the dump records an argument {name!r}, which {function.__qualname__}{signature} "
                               "does not take (has the code changed since the dump?)")
        if p.kind == p.VAR_POSITIONAL:
            args.extend(value)
        elif p.kind == p.VAR_KEYWORD:
            kwargs.update(value)
        elif p.kind == p.KEYWORD_ONLY:
            kwargs[name] = value
        else:
            args.append(value)
    result = function(*args, **kwargs)
    # The outputs are read back once this returns: work the function queued on any of torch's
    # streams (blocking or not) must be done by then, on each device replay rebuilt a tensor on,
    # and on the current device (the function may have changed it).
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        for index in sorted(_cuda_devices(values) | {torch.cuda.current_device()}):
            torch.cuda.synchronize(index)
    return result


def _cuda_devices(values):
    """The indices of the CUDA devices of the torch tensors among `values` (lists, tuples and
    dicts included)."""
    torch = sys.modules["torch"]
    found = set()
    stack = list(values)
    while stack:
        v = stack.pop()
        if isinstance(v, torch.Tensor):
            if v.is_cuda:
                found.add(v.device.index)
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
    return found
