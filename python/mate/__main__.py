"""python -m mate ...: the `mate` program (mate env, module-status, replay, guard-run, ...), run
in this interpreter's process by the C++ core. `replay` also runs calls logged from Python."""

import sys

from . import _mate


def main(argv=None):
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["replay"]:
        _mate.enable_python_replay()
    sys.stdout.flush()
    sys.stderr.flush()
    return _mate.run_program(args)


if __name__ == "__main__":
    sys.exit(main())
