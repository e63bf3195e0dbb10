"""`python -m tracefault ARGS`: the binary, with these arguments."""

from __future__ import annotations

import os
import subprocess
import sys

from tracefault._bin import find_tracefault_bin


def main() -> None:
    try:
        binary = find_tracefault_bin()
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    argv = [binary, *sys.argv[1:]]
    if sys.platform == "win32":
        # No exec on Windows: run it and pass its status on.
        sys.exit(subprocess.run(argv).returncode)
    os.execv(binary, argv)


if __name__ == "__main__":
    main()
