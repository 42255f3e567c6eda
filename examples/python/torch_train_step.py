"""A small CPU training step (torch.nn.Linear, autograd, SGD): the PyTorch workload that
`mate guard-run` is tested with (tests/guard/test_guard_run_python.cpp) and timed on
(bench/guard/run_torch_bench.sh).

    python3 examples/python/torch_train_step.py
    mate guard-run --summary -- python3 examples/python/torch_train_step.py

stdout: the loss and the parameters' sums, the same with and without the guard.
stderr: whether every parameter's and gradient's storage ends where a tail-mode guarded
allocation does (its size rounded up to c10's 64 bytes ends at a page boundary): True under the
guard, and (almost surely) False on glibc's heap.
"""

import sys

import torch

torch.manual_seed(0)
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(32, 16)
y = torch.randn(32, 4)
for step in range(5):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
print("loss %.6f" % loss.item())
print(model.weight.sum().item(), model.bias.sum().item())


def ends_at_a_page(t):
    nbytes = t.element_size() * t.nelement()
    return (t.data_ptr() + (nbytes + 63) // 64 * 64) % 4096 == 0


tensors = [model.weight, model.bias, model.weight.grad, model.bias.grad, x, y]
print("tensor storages at a guard:", all(ends_at_a_page(t) for t in tensors), file=sys.stderr)
