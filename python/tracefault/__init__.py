"""tracefault: deterministic chaos testing for LLM agents, from Python.

The wheel installs the `tracefault` binary into the environment's bin/ (run it as `tracefault`
or `python -m tracefault`); this package finds it and drives two of its commands:

    from tracefault import exec_agent, serve

    result = exec_agent("scenarios/01-worked-example.toml", ["python", "agent.py"], runs=5)
    result.assert_terminates()          # checklist item 6, as a pytest failure
    result.metrics["success_rate"]      # the agent's row of summary.csv

    with serve("scenarios/01-worked-example.toml") as server:
        server.env["OPENAI_BASE_URL"]   # the variables exec gives an agent

Its pytest plugin (loaded through the `pytest11` entry point) adds the `tracefault` marker and
the `tracefault_run`, `tracefault_result` and `tracefault_serve` fixtures.
"""

from tracefault._bin import find_tracefault_bin
from tracefault._exec import CHECK_KEYS, Check, ExecResult, TracefaultError, exec_agent
from tracefault._serve import Server, serve

try:
    from importlib.metadata import PackageNotFoundError, version

    try:
        __version__ = version("tracefault")
    except PackageNotFoundError:  # imported from a source tree
        __version__ = "0+unknown"
except ImportError:  # pragma: no cover
    __version__ = "0+unknown"

__all__ = [
    "CHECK_KEYS",
    "Check",
    "ExecResult",
    "Server",
    "TracefaultError",
    "exec_agent",
    "find_tracefault_bin",
    "serve",
    "__version__",
]
