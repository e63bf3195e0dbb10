"""Where the `tracefault` binary is."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

ENV_VAR = "TRACEFAULT_BIN"


def _exe() -> str:
    return "tracefault" + (sysconfig.get_config_var("EXE") or "")


def _candidates() -> list[tuple[str, Path]]:
    """The places pip, uv and their options put a wheel's scripts, most specific first."""
    exe = _exe()
    found: list[tuple[str, Path]] = []
    scripts = sysconfig.get_path("scripts")
    if scripts:
        found.append(("this interpreter's scripts directory", Path(scripts) / exe))
    # `pip install --user`.
    scheme = {"nt": "nt_user", "posix": "posix_user"}.get(os.name)
    if sys.platform == "darwin" and sys._framework:  # type: ignore[attr-defined]
        scheme = "osx_framework_user"
    if scheme and scheme in sysconfig.get_scheme_names():
        user = sysconfig.get_path("scripts", scheme=scheme)
        if user:
            found.append(("the user scripts directory", Path(user) / exe))
    # The virtualenv's bin/ beside its interpreter (also where `uv tool` and `uvx` put it).
    found.append(("beside the Python executable", Path(sys.executable).parent / exe))
    # `pip install --target DIR`: DIR/bin beside DIR/tracefault.
    found.append(("the --target install's bin/", Path(__file__).resolve().parent.parent / "bin" / exe))
    return found


def find_tracefault_bin() -> str:
    """The path of the `tracefault` binary.

    In order: $TRACEFAULT_BIN (an explicit choice: an error if it is not an executable file),
    the scripts directory pip installed this package's binary into (the virtualenv's bin/),
    the user scripts directory, the directory of the Python executable, a `--target` install's
    bin/, then PATH. Raises FileNotFoundError naming every place it looked.
    """
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        path = Path(explicit).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            return str(path.resolve())
        raise FileNotFoundError(f"${ENV_VAR}={explicit!r} is not an executable file")
    looked = []
    for where, path in _candidates():
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
        looked.append(f"{where} ({path})")
    on_path = shutil.which("tracefault")
    if on_path:
        return on_path
    looked.append("PATH")
    raise FileNotFoundError(
        "no tracefault binary: looked in " + ", ".join(looked)
        + f"; install it (pip install tracefault, or cargo install) or set ${ENV_VAR}"
    )
