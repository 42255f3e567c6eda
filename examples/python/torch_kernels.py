"""A kernel library's Python API, instrumented with MATE (the demo's Python part, docs/python.md).

    MATE_LOGLEVEL=3 python3 examples/python/torch_kernels.py        # log each call
    MATE_LOGLEVEL=10 MATE_DUMP_DIR=dumps python3 examples/python/torch_kernels.py
    python3 -m mate replay --dir dumps                               # run the calls again
"""

import torch

from mate.api_logging import mate_api


@mate_api(name="demo.rmsnorm")
def rmsnorm(x, weight, eps=1e-6):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * weight


@mate_api(name="demo.scaled_matmul", outputs=("out",))
def scaled_matmul(a, b, out, scale=1.0):
    torch.matmul(a, b, out=out)
    out.mul_(scale)


if __name__ == "__main__":
    torch.manual_seed(0)
    x, w = torch.randn(4, 64), torch.rand(64)
    y = rmsnorm(x, w)
    a, b = torch.randn(16, 32), torch.randn(64, 32).t()  # b: a transposed (non-contiguous) operand
    out = torch.empty(16, 64)
    scaled_matmul(a, b, out, scale=0.5)
    print(f"rmsnorm checksum {y.sum().item():.4f}, matmul checksum {out.sum().item():.4f}")
