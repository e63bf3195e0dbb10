"""`tracefault serve` from Python: the mocks over HTTP, and the environment that points at them."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Any, Dict, List, Optional, Sequence, Union

from tracefault._bin import find_tracefault_bin
from tracefault._exec import TracefaultError, options_to_args

SERVE_OPTIONS = frozenset({"addr", "run", "time_scale", "agents", "mcp_strategy"})

_BANNER_END = "# tracefault is serving"


class Server:
    """A running `tracefault serve`: its environment (the variables `exec` gives an agent),
    base URL and process. Stop it with `stop()`, or use it as a context manager."""

    def __init__(self, scenario: Union[str, os.PathLike], extra_args: Sequence[str] = (),
                 startup_timeout: float = 30.0, **options: Any) -> None:
        options.setdefault("addr", "127.0.0.1:0")
        self.scenario = os.fspath(scenario)
        self.command: List[str] = [
            find_tracefault_bin(),
            "serve",
            self.scenario,
            *options_to_args(options, SERVE_OPTIONS, "serve"),
            *extra_args,
        ]
        self._log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            self.command, stdout=subprocess.PIPE, stderr=self._log, stdin=subprocess.DEVNULL
        )
        self.env: Dict[str, str] = {}
        self.banner: List[str] = []
        if not self._read_banner(startup_timeout):
            out = self._stderr()
            self.stop()
            raise TracefaultError(
                f"tracefault serve did not start ({shlex.join(self.command)}, exit {self.process.returncode}):\n{out}"
            )
        # The banner leaves out the proxy variables exec sets; a test's own HTTP client must not
        # send loopback requests through a proxy of the machine.
        loopback = "127.0.0.1,localhost,::1"
        for k in ("NO_PROXY", "no_proxy"):
            have = os.environ.get(k, "")
            self.env[k] = f"{have},{loopback}" if have else loopback

    def _read_banner(self, timeout: float) -> bool:
        done = threading.Event()

        def read() -> None:
            assert self.process.stdout is not None
            for raw in self.process.stdout:
                line = raw.decode(errors="replace").rstrip("\n")
                self.banner.append(line)
                if line.startswith("export "):
                    key, _, value = line[len("export "):].partition("=")
                    parts = shlex.split(value) if value else [""]
                    self.env[key] = parts[0] if parts else ""
                elif line.startswith(_BANNER_END):
                    done.set()
                    return

        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(timeout)
        if not done.is_set():
            return False
        # serve ignores a closed stdout: nothing more is read from it.
        assert self.process.stdout is not None
        self.process.stdout.close()
        return True

    def _stderr(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace").strip()

    @property
    def url(self) -> str:
        """The mocks' base URL (http://127.0.0.1:PORT)."""
        return self.env["TRACEFAULT_BASE_URL"]

    @property
    def tools_url(self) -> str:
        return self.env["TRACEFAULT_TOOLS_URL"]

    @property
    def mcp_url(self) -> str:
        return self.env["TRACEFAULT_MCP_URL"]

    @property
    def stderr(self) -> str:
        """What serve printed on stderr so far (after stop: "served N model calls and M tool calls")."""
        return self._stderr()

    def stop(self, timeout: float = 10.0) -> Optional[int]:
        """Ctrl-C to serve (SIGINT; terminate on Windows), then kill if it has not stopped."""
        if self.process.poll() is None:
            if sys.platform == "win32":
                self.process.terminate()
            else:
                self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"Server(scenario={self.scenario!r}, url={self.env.get('TRACEFAULT_BASE_URL')!r})"


def serve(scenario: Union[str, os.PathLike], **options: Any) -> Server:
    """Start `tracefault serve SCENARIO` (a free loopback port by default) and return when its
    environment is known. Options: run, time_scale, agents, mcp_strategy, addr, extra_args."""
    return Server(scenario, **options)
