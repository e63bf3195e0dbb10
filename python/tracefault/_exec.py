"""`tracefault exec` from Python: run an agent against the mocks and read what it left behind."""

from __future__ import annotations

import csv
import inspect
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from tracefault._bin import find_tracefault_bin

Agent = Union[str, Sequence[str], Callable[[], Any]]

# `tracefault exec`'s options, as keyword arguments (underscores for dashes). A boolean is a flag,
# a list repeats the option. `runs` and `out` are arguments of their own.
EXEC_OPTIONS = frozenset(
    {
        "addr",
        "timeout_s",
        "json_envelope",
        "time_scale",
        "agents",
        "mcp_strategy",
        "label",
        "baseline",
        "require_baseline",
        "fail_on_regression",
        "allow_elsewhere",
    }
)

# The checklist, by number: the keys the assertion helpers and `ExecResult.check` accept. The
# numbers are part of each check's title in exec.json ("5. no raw exception text ...").
CHECK_KEYS = {
    1: "round_trip",
    2: "no_blind_retry",
    3: "is_error",
    4: "json_envelope",
    5: "no_raw_exception",
    6: "terminates",
    7: "exit_status",
    8: "stays_local",
}
_KEY_NUMBERS = {v: k for k, v in CHECK_KEYS.items()}

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class TracefaultError(RuntimeError):
    """tracefault could not run the agent: a bad scenario or option (exit 2), or no binary."""


def _fail(message: str) -> None:
    """A test failure in pytest's own terms where pytest runs, else an AssertionError."""
    __tracebackhide__ = True
    try:
        import pytest
    except ImportError:  # pragma: no cover - used outside pytest
        raise AssertionError(message) from None
    pytest.fail(message)


def options_to_args(options: Dict[str, Any], known: frozenset, command: str) -> List[str]:
    """Keyword options as command-line flags: `timeout_s=30` -> `--timeout-s 30`."""
    args: List[str] = []
    unknown = sorted(set(options) - known)
    if unknown:
        raise TypeError(
            f"tracefault {command}: unknown option(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(known))} (or pass raw flags with extra_args=[...])"
        )
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            args.append(flag)
        elif isinstance(value, (list, tuple)):
            for v in value:
                args += [flag, str(v)]
        else:
            args += [flag, str(value)]
    return args


@dataclass
class Check:
    """One item of exec's checklist."""

    number: int
    key: str
    title: str
    result: str  # PASS, FAIL or N/A
    passed: bool  # N/A counts as passed
    details: List[str] = field(default_factory=list)

    @property
    def failing_runs(self) -> List[int]:
        """The runs the details name ("run 3: ..."), in order, each once."""
        runs: List[int] = []
        for d in self.details:
            m = re.match(r"run (\d+)", d)
            if m and int(m.group(1)) not in runs:
                runs.append(int(m.group(1)))
        return runs

    def __str__(self) -> str:
        return f"{self.result} {self.title}"


def _number(title: str) -> int:
    m = re.match(r"\s*(\d+)\.", title)
    return int(m.group(1)) if m else 0


def _float(v: str) -> Optional[float]:
    try:
        return float(v) if v != "" else None
    except ValueError:
        return None


@dataclass
class ExecResult:
    """What one `tracefault exec` left: its exit code, exec.json and summary.csv, read."""

    exit_code: int
    report_dir: Path
    command: List[str]
    stdout: str
    stderr: str
    label: str
    scenario: str
    runs_requested: int
    report: Dict[str, Any] = field(default_factory=dict)
    rows: List[Dict[str, str]] = field(default_factory=list)

    # ---- what exec.json and summary.csv say -------------------------------------------------

    @property
    def passed(self) -> bool:
        """Every check and every gate that exec checked held (exit code 0)."""
        return self.exit_code == EXIT_OK

    @property
    def runs(self) -> List[Dict[str, Any]]:
        """exec.json's per-run records (ended, agent_exit_code, counted, http_requests, ...),
        each with its index as "run"."""
        return [dict(r, run=r.get("run", i)) for i, r in enumerate(self.report.get("runs", []))]

    @property
    def checks(self) -> List[Check]:
        """exec.json's checklist."""
        out = []
        for c in self.report.get("checks", []):
            n = _number(c.get("check", ""))
            out.append(
                Check(
                    number=n,
                    key=CHECK_KEYS.get(n, f"check_{n}"),
                    title=c.get("check", ""),
                    result=c.get("result", ""),
                    passed=bool(c.get("passed")),
                    details=list(c.get("details", [])),
                )
            )
        return out

    @property
    def metrics(self) -> Dict[str, Optional[float]]:
        """The agent's row of summary.csv, numeric columns as floats (None where empty)."""
        row = self.row(self.label)
        if row is None:
            return {}
        return {k: _float(v) for k, v in row.items() if k not in ("scenario", "strategy")}

    def row(self, strategy: str) -> Optional[Dict[str, str]]:
        """A row of summary.csv as strings: the agent's (its label) or `recorded`'s."""
        for r in self.rows:
            if r.get("strategy") == strategy:
                return r
        return None

    @property
    def outcome(self) -> str:
        """exec's outcome line: "answered 5/5 · gave up 0 · looped 0 · ..."."""
        return str(self.report.get("outcome", ""))

    def check(self, which: Union[int, str]) -> Check:
        """A check by number (5) or key ("no_raw_exception")."""
        n = which if isinstance(which, int) else _KEY_NUMBERS.get(which)
        for c in self.checks:
            if c.number == n:
                return c
        raise KeyError(f"no check {which!r} in {self.report_dir / 'exec.json'} (keys: {', '.join(_KEY_NUMBERS)})")

    # ---- assertions, failing in pytest's terms ------------------------------------------------

    def assert_check(self, which: Union[int, str]) -> Check:
        """Fail the test unless the check passed (or does not apply)."""
        __tracebackhide__ = True
        c = self.check(which)
        if not c.passed:
            _fail(self._failure(c))
        return c

    def assert_round_trips(self) -> Check:
        """Check 1: every provider format the agent used carried a tool result back, or an ending."""
        __tracebackhide__ = True
        return self.assert_check(1)

    def assert_never_retries_terminal_failures(self) -> Check:
        """Check 2: no identical re-call after a retryable=false failure without a model turn."""
        __tracebackhide__ = True
        return self.assert_check(2)

    def assert_flags_anthropic_errors(self) -> Check:
        """Check 3: is_error on every failed Anthropic tool result."""
        __tracebackhide__ = True
        return self.assert_check(3)

    def assert_json_envelopes(self) -> Check:
        """Check 4: every OpenAI tool message parses as JSON (run with json_envelope=True)."""
        __tracebackhide__ = True
        return self.assert_check(4)

    def assert_no_raw_exception_reaches_model(self) -> Check:
        """Check 5: no stack trace or raw exception text in what the model is shown."""
        __tracebackhide__ = True
        return self.assert_check(5)

    def assert_terminates(self) -> Check:
        """Check 6: every run ends with an answer (no give-up, loop, step cap or midway stop)."""
        __tracebackhide__ = True
        return self.assert_check(6)

    def assert_exits_cleanly(self) -> Check:
        """Check 7: the agent's process exits with status 0 in every run."""
        __tracebackhide__ = True
        return self.assert_check(7)

    def assert_stays_local(self) -> Check:
        """Check 8: every request went to the mocks."""
        __tracebackhide__ = True
        return self.assert_check(8)

    def assert_checks_pass(self) -> None:
        """Every check of the list passed (or does not apply)."""
        __tracebackhide__ = True
        failed = [c for c in self.checks if not c.passed]
        if failed:
            _fail("\n\n".join(self._failure(c, context=False) for c in failed) + "\n\n" + self._context())

    def assert_passed(self) -> None:
        """exec passed: every check and every gate on the agent (its exit code is 0)."""
        __tracebackhide__ = True
        if self.passed:
            return
        self.assert_checks_pass()
        lines = [ln for ln in self.stdout.splitlines() + self.stderr.splitlines() if "FAIL" in ln]
        _fail(
            f"tracefault exec exited {self.exit_code}:\n"
            + "\n".join("  " + ln.strip() for ln in lines)
            + "\n\n"
            + self._context()
        )

    def assert_metric(self, name: str, min: Optional[float] = None, max: Optional[float] = None) -> float:
        """The agent's metric `name` (a summary.csv column) within [min, max]."""
        __tracebackhide__ = True
        metrics = self.metrics
        if name not in metrics:
            _fail(f"no metric {name!r} in {self.report_dir / 'summary.csv'}; columns: {', '.join(metrics)}")
        value = metrics[name]
        if value is None or (min is not None and value < min) or (max is not None and value > max):
            bounds = " and ".join(
                s for s in (f">= {min}" if min is not None else "", f"<= {max}" if max is not None else "") if s
            )
            _fail(f"tracefault metric {name} = {value}, expected {bounds}\n\n{self._context()}")
        return value  # type: ignore[return-value]

    # ---- messages -------------------------------------------------------------------------------

    def _failure(self, c: Check, context: bool = True) -> str:
        shown = c.details[:10]
        lines = [f"tracefault: FAIL {c.title}"]
        lines += [f"  {d}" for d in shown]
        if len(c.details) > len(shown):
            lines.append(f"  ... and {len(c.details) - len(shown)} more")
        runs = c.failing_runs
        if runs:
            log = self.report_dir / f"agent-run-{runs[0]}.log"
            if log.is_file():
                tail = log.read_text(errors="replace").splitlines()[-15:]
                lines.append(f"the agent's output in run {runs[0]} ({log}, last {len(tail)} lines):")
                lines += [f"  | {t}" for t in tail]
        if context:
            lines += ["", self._context()]
        return "\n".join(lines)

    def _context(self) -> str:
        return (
            f"scenario {self.scenario}, {self.runs_requested} run(s): {self.outcome}\n"
            f"reports: {self.report_dir}\n"
            f"reproduce: {shlex.join(self.command)}"
        )

    def __repr__(self) -> str:
        return (
            f"ExecResult(exit_code={self.exit_code}, passed={self.passed}, "
            f"report_dir={str(self.report_dir)!r}, outcome={self.outcome!r})"
        )


def _callable_command(agent: Callable[[], Any]) -> List[str]:
    """A module-level function as a command: a fresh interpreter that imports and calls it."""
    module = getattr(agent, "__module__", None)
    qualname = getattr(agent, "__qualname__", "")
    if not module or "<locals>" in qualname or "<lambda>" in qualname:
        raise TypeError(
            f"{agent!r}: an agent function must be defined at a module's top level "
            "(it runs in a fresh process per run), or pass a command"
        )
    try:
        source = inspect.getfile(agent)
    except TypeError:
        source = ""
    return [sys.executable, "-m", "tracefault._agent", module, qualname, source]


def command_of(agent: Agent) -> List[str]:
    """The agent as an argv: a list as it is, a string split as a POSIX shell would, a
    module-level function as `python -m tracefault._agent MODULE QUALNAME FILE`."""
    if isinstance(agent, str):
        argv = shlex.split(agent)
    elif callable(agent):
        argv = _callable_command(agent)
    else:
        argv = [str(a) for a in agent]
    if not argv:
        raise TypeError("the agent's command is empty")
    return argv


def exec_agent(
    scenario: Union[str, os.PathLike],
    agent: Agent,
    *,
    runs: int = 1,
    out: Union[str, os.PathLike, None] = None,
    env: Optional[Dict[str, str]] = None,
    cwd: Union[str, os.PathLike, None] = None,
    extra_args: Sequence[str] = (),
    step_summary: bool = False,
    timeout: Optional[float] = None,
    **options: Any,
) -> ExecResult:
    """Run `tracefault exec SCENARIO --runs RUNS --out OUT [options] -- AGENT` and read its reports.

    `agent`: a command (list, or a string split as a shell would) or a module-level function
    (called in a fresh Python process in each run; its return value is the exit status).
    `options`: exec's flags as keywords (timeout_s=30, json_envelope=True, label="v2",
    baseline="old-reports", allow_elsewhere=["example.com"], ...). `out`: a temporary folder
    when not given. `step_summary`: leave $GITHUB_STEP_SUMMARY set for exec (by default a test's
    exec does not write the CI job's summary). `env`, `cwd`: exec's environment (the agent's, plus
    what exec sets) and working directory. `timeout`: seconds for the whole exec (each run is
    bounded by exec's own `timeout_s`, 120 by default). Raises TracefaultError when exec cannot run the
    agent at all (exit 2: a bad scenario or option); a failed check or gate is in the result.
    """
    argv = command_of(agent)
    label = options.get("label")
    if label is None and callable(agent) and not isinstance(agent, (str, list, tuple)):
        label = options["label"] = getattr(agent, "__name__", None)
    if label is None:
        label = os.path.basename(argv[0]) or argv[0]
    report_dir = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="tracefault-exec-"))
    binary = find_tracefault_bin()
    command = [
        binary,
        "exec",
        os.fspath(scenario),
        "--runs",
        str(runs),
        "--out",
        str(report_dir),
        *options_to_args(options, EXEC_OPTIONS, "exec"),
        *extra_args,
        "--",
        *argv,
    ]
    child_env = dict(os.environ if env is None else env)
    if not step_summary:
        child_env.pop("GITHUB_STEP_SUMMARY", None)
    if argv[:3] == [sys.executable, "-m", "tracefault._agent"]:
        # The function's module must import in the child as it did here.
        paths = [p for p in sys.path if p]
        if child_env.get("PYTHONPATH"):
            paths.append(child_env["PYTHONPATH"])
        child_env["PYTHONPATH"] = os.pathsep.join(paths)
    proc = subprocess.run(
        command, cwd=cwd, env=child_env, capture_output=True, text=True, errors="replace", timeout=timeout
    )
    report: Dict[str, Any] = {}
    exec_json = report_dir / "exec.json"
    if exec_json.is_file():
        report = json.loads(exec_json.read_text())
    if proc.returncode not in (EXIT_OK, EXIT_FAILED) or not report:
        raise TracefaultError(
            f"tracefault exec exited {proc.returncode} without a report"
            f" ({shlex.join(command)}):\n{proc.stderr.strip() or proc.stdout.strip()}"
        )
    rows: List[Dict[str, str]] = []
    summary = report_dir / "summary.csv"
    if summary.is_file():
        with summary.open(newline="") as f:
            rows = list(csv.DictReader(f))
    return ExecResult(
        exit_code=proc.returncode,
        report_dir=report_dir,
        command=command,
        stdout=proc.stdout,
        stderr=proc.stderr,
        label=label,
        scenario=os.fspath(scenario),
        runs_requested=runs,
        report=report,
        rows=rows,
    )
