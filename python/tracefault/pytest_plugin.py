"""tracefault's pytest plugin (registered through the `pytest11` entry point).

    @pytest.mark.tracefault("scenarios/01-worked-example.toml", runs=5,
                            cmd=[sys.executable, "agent.py"])
    def test_agent(tracefault_result):
        tracefault_result.assert_terminates()
        tracefault_result.assert_never_retries_terminal_failures()
        tracefault_result.assert_no_raw_exception_reaches_model()
        assert tracefault_result.metrics["success_rate"] >= 0.8

    @pytest.mark.tracefault("scenarios/01-worked-example.toml", runs=3)
    def test_two_versions(tracefault_run):
        old = tracefault_run([sys.executable, "agent.py"], label="old")
        new = tracefault_run(my_agent_function, label="new")   # a module-level function
        assert new.metrics["calls_mean"] <= old.metrics["calls_mean"]

    @pytest.mark.tracefault("scenarios/01-worked-example.toml")
    def test_in_process(tracefault_serve):
        # os.environ points at the mocks for this test: OPENAI_BASE_URL, TRACEFAULT_TOOLS_URL, ...
        answer = my_agent()

Fixtures:
- `tracefault_run(agent=None, scenario=None, runs=None, **options)`: runs `tracefault exec` for
  the marker's scenario (or the one given) on `agent` (a command list, a shell-style string, or a
  module-level function run in a fresh interpreter per run) and returns an ExecResult: `.runs`,
  `.checks`, `.metrics`, `.exit_code`, `.report_dir` and the `assert_*` helpers. Reports go to
  the test's tmp_path.
- `tracefault_result`: the marker's `cmd`, run once: `tracefault_run()`.
- `tracefault_serve`: `tracefault serve` for the marker's scenario, on a free loopback port, with
  its variables set in os.environ for the test (restored after) and stopped after the test;
  gives the Server (`.env`, `.url`, `.tools_url`). No checklist: that is exec's.

The marker: `tracefault(scenario, runs=1, cmd=None, **options)`; the options are exec's flags as
keywords (timeout_s, time_scale, json_envelope, label, baseline, fail_on_regression,
allow_elsewhere, ...); serve takes those it has (time_scale, agents, mcp_strategy, and run: which
run's fault draws it serves).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import pytest

from tracefault._exec import EXEC_OPTIONS, ExecResult, TracefaultError, exec_agent
from tracefault._serve import SERVE_OPTIONS, Server

MARKER_HELP = (
    "tracefault(scenario, runs=1, cmd=None, **options): the scenario the tracefault_run, "
    "tracefault_result and tracefault_serve fixtures use; cmd is the agent's command; options "
    "are `tracefault exec` flags as keywords (timeout_s=30, json_envelope=True, ...)"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tracefault", "tracefault (chaos testing for LLM agents)")
    group.addoption(
        "--tracefault-bin",
        default=None,
        metavar="PATH",
        help="the tracefault binary (default: $TRACEFAULT_BIN, else the one installed beside "
        "this Python, else PATH)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    binary = config.getoption("--tracefault-bin", default=None)
    if binary:
        os.environ["TRACEFAULT_BIN"] = os.path.abspath(binary)


class _Spec:
    """What the test's `tracefault` marker says."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        marker = request.node.get_closest_marker("tracefault")
        self.present = marker is not None
        args: Tuple[Any, ...] = marker.args if marker else ()
        kwargs: Dict[str, Any] = dict(marker.kwargs) if marker else {}
        if len(args) > 1:
            raise pytest.UsageError(f"{request.node.nodeid}: @pytest.mark.tracefault takes one positional argument, the scenario")
        self.scenario = args[0] if args else kwargs.pop("scenario", None)
        self.runs = kwargs.pop("runs", None)
        self.cmd = kwargs.pop("cmd", kwargs.pop("agent", None))
        unknown = sorted(set(kwargs) - EXEC_OPTIONS - SERVE_OPTIONS)
        if unknown:
            raise pytest.UsageError(
                f"{request.node.nodeid}: @pytest.mark.tracefault: unknown option(s) {', '.join(unknown)}; "
                f"exec's: {', '.join(sorted(EXEC_OPTIONS))}; serve's: {', '.join(sorted(SERVE_OPTIONS))}"
            )
        self.options = kwargs


def _resolve(request: pytest.FixtureRequest, scenario: Any) -> str:
    """A relative scenario path: from the working directory, else pytest's rootdir, else the
    test file's folder (as given when none has it: exec then says what is wrong)."""
    p = Path(os.fspath(scenario))
    if p.is_absolute() or p.exists():
        return str(p)
    for base in (Path(str(request.config.rootpath)), Path(str(request.node.path)).parent):
        if (base / p).exists():
            return str(base / p)
    return str(p)


@pytest.fixture
def tracefault_run(request: pytest.FixtureRequest, tmp_path: Path):
    """A function that runs `tracefault exec` on an agent and returns the ExecResult."""
    spec = _Spec(request)
    count = [0]

    def run(agent: Any = None, scenario: Any = None, runs: Optional[int] = None, **options: Any) -> ExecResult:
        __tracebackhide__ = True
        agent = agent if agent is not None else spec.cmd
        scenario = scenario if scenario is not None else spec.scenario
        if agent is None:
            pytest.fail("tracefault_run: no agent: pass one, or give the marker cmd=[...]", pytrace=False)
        if scenario is None:
            pytest.fail(
                'tracefault_run: no scenario: pass one, or mark the test @pytest.mark.tracefault("scenario.toml")',
                pytrace=False,
            )
        merged = {k: v for k, v in spec.options.items() if k in EXEC_OPTIONS}
        merged.update(options)
        out = tmp_path / ("tracefault" if count[0] == 0 else f"tracefault-{count[0]}")
        count[0] += 1
        try:
            result = exec_agent(
                _resolve(request, scenario),
                agent,
                runs=int(runs if runs is not None else (spec.runs or 1)),
                out=merged.pop("out", out),
                **merged,
            )
        except (TracefaultError, FileNotFoundError) as e:
            pytest.fail(str(e), pytrace=False)
        request.node.add_report_section(
            "call", "tracefault", f"{result.outcome}\nexit {result.exit_code}; reports in {result.report_dir}\n"
        )
        return result

    return run


@pytest.fixture
def tracefault_result(tracefault_run) -> ExecResult:
    """The marker's agent (cmd=...) run under `tracefault exec` for the marker's scenario."""
    return tracefault_run()


@pytest.fixture
def tracefault_serve(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """`tracefault serve` for the marker's scenario; os.environ points at it during the test."""
    spec = _Spec(request)
    if spec.scenario is None:
        pytest.fail(
            'tracefault_serve: mark the test @pytest.mark.tracefault("scenario.toml")', pytrace=False
        )
    options = {k: v for k, v in spec.options.items() if k in SERVE_OPTIONS}
    try:
        server = Server(_resolve(request, spec.scenario), **options)
    except (TracefaultError, FileNotFoundError) as e:
        pytest.fail(str(e), pytrace=False)
    try:
        for k, v in server.env.items():
            monkeypatch.setenv(k, v)
        yield server
    finally:
        server.stop()
