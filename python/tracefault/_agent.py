"""`python -m tracefault._agent MODULE QUALNAME [FILE]`: call a module-level agent function.

What `exec_agent` (and the pytest plugin) run when the agent is a Python function rather than a
command: exec starts this once per run with the mocks' environment. The function takes no
argument; an int it returns is the exit status (anything else is 0), and an exception is printed
with its traceback and exits 1.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback


def _load(module: str, source: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        if not source:
            raise
    # A module pytest imported under a name that does not import here (importmode=importlib).
    spec = importlib.util.spec_from_file_location(module, source)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {module} from {source}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module] = mod
    spec.loader.exec_module(mod)
    return mod


def main(argv: list) -> int:
    if len(argv) < 2:
        print("usage: python -m tracefault._agent MODULE QUALNAME [FILE]", file=sys.stderr)
        return 2
    module, qualname = argv[0], argv[1]
    source = argv[2] if len(argv) > 2 else ""
    try:
        obj = _load(module, source)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        result = obj()
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
        return 1
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
