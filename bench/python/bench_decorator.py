"""Calls per second of a mate_api-decorated torch function at MATE_LOGLEVEL 0, 1, 3 and 5,
against the same function undecorated, in one run (each level in its own process, since the
level is read at import). Two 16x16 f32 tensors and a float, logged to a file.

    PYTHONPATH=build/default/python /usr/bin/python3 bench/python/bench_decorator.py [--calls N]
"""

import argparse
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import sys, time, torch
from mate.api_logging import mate_api
def add(x, y, alpha):
    return x
decorated = mate_api(add)
x, y = torch.ones(16, 16), torch.ones(16, 16)
n = int(sys.argv[1])
for f in (add, decorated):       # warm up both
    for _ in range(min(n, 1000)):
        f(x, y, 0.5)
best = {}
for label, f in (("plain", add), ("decorated", decorated)):
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            f(x, y, 0.5)
        rate = n / (time.perf_counter() - t0)
        best[label] = max(best.get(label, 0), rate)
print(best["plain"], best["decorated"], decorated is add)
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    print(f"{'level':>5}  {'undecorated calls/s':>20}  {'decorated calls/s':>18}  {'ratio':>6}  decorator is f")
    with tempfile.TemporaryDirectory() as tmp:
        for level in (0, 1, 3, 5):
            env = dict(os.environ, MATE_LOGLEVEL=str(level), MATE_LOGDEST=os.path.join(tmp, f"log{level}.txt"))
            out = subprocess.run([sys.executable, "-c", CHILD, str(args.calls)], env=env, check=True,
                                 capture_output=True, text=True).stdout.split()
            plain, decorated, same = float(out[0]), float(out[1]), out[2]
            print(f"{level:>5}  {plain:>20,.0f}  {decorated:>18,.0f}  {decorated / plain:>6.3f}  {same}")


if __name__ == "__main__":
    main()
