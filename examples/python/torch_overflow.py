"""A bug for the demo: one element written past the end of a torch tensor's storage.

    python3 examples/python/torch_overflow.py                   # runs "fine": memory silently damaged
    mate guard-run -- python3 examples/python/torch_overflow.py # caught at the write, with its stack

The tensor holds 64 float32 (256 bytes, a multiple of c10's 64-byte alignment), so its storage
ends exactly at the guard page in tail mode and the first byte past it faults.
"""

import ctypes

import torch


def write_one_past_the_end(t):
    # What a buggy kernel or extension does: a raw write just past the last element.
    value = ctypes.c_float(1.0)
    ctypes.memmove(t.data_ptr() + t.numel() * t.element_size(), ctypes.byref(value), ctypes.sizeof(value))


if __name__ == "__main__":
    activations = torch.zeros(64, dtype=torch.float32)
    write_one_past_the_end(activations)
    print(f"done, sum {activations.sum().item()}")
