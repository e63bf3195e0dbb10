"""The pytest plugin and the package, on the example agents and the bundled worked example.

The example agent (examples/openai_agent.py, on the official openai SDK) passes every check; the
naive agent (agents/naive_agent.py) fails the ones its flags break. Everything runs against the
mocks on loopback: no network.
"""

import json
import os
import subprocess
import sys
import urllib.request

import pytest

import tracefault
from tracefault import CHECK_KEYS, ExecResult, exec_agent, find_tracefault_bin

from conftest import EXAMPLE, NAIVE, REPO, SCENARIO


# ---- the marker and tracefault_result: the example agent passes ----------------------------------


@pytest.mark.tracefault(str(SCENARIO), runs=3, cmd=EXAMPLE)
def test_marker_runs_the_example_agent(tracefault_result, tmp_path):
    r = tracefault_result
    assert isinstance(r, ExecResult)
    assert r.exit_code == 0 and r.passed
    assert r.report_dir == tmp_path / "tracefault"
    assert (r.report_dir / "exec.json").is_file() and (r.report_dir / "summary.csv").is_file()
    # The runs: one record each, with its index.
    assert [run["run"] for run in r.runs] == [0, 1, 2]
    assert all(run["ended"] == "answer" and run["agent_exit_code"] == 0 for run in r.runs)
    assert all(run["http_requests"]["provider"] == run["counted"]["model_calls"] for run in r.runs)
    # The checklist: eight items, numbered and keyed; this agent passes each.
    assert [c.number for c in r.checks] == list(range(1, 9))
    assert [c.key for c in r.checks] == [CHECK_KEYS[n] for n in range(1, 9)]
    assert r.check("no_raw_exception").title == "5. no raw exception text reaches the model"
    assert r.check(3).result == "N/A" and r.check(3).passed
    r.assert_terminates()
    r.assert_never_retries_terminal_failures()
    r.assert_no_raw_exception_reaches_model()
    r.assert_exits_cleanly()
    r.assert_round_trips()
    r.assert_stays_local()
    r.assert_checks_pass()
    r.assert_passed()
    # The metrics: the agent's row of summary.csv (its label: the command's file name).
    assert r.label == os.path.basename(sys.executable)
    assert r.metrics["runs"] == 3.0
    assert r.metrics["success_rate"] == 1.0
    assert r.metrics["model_calls_mean"] == 3.0 and r.metrics["tool_calls_mean"] == 4.0
    assert r.assert_metric("loop_rate", max=0.0) == 0.0
    assert r.row("recorded") is not None
    assert "answered 3/3" in r.outcome


@pytest.mark.tracefault(str(SCENARIO), runs=2)
def test_run_fixture_takes_the_agent_and_exec_options(tracefault_run, tmp_path):
    chat = tracefault_run(EXAMPLE, label="chat")
    responses = tracefault_run(EXAMPLE + ["--api", "responses", "--stream"], label="responses", timeout_s=60)
    assert chat.passed and responses.passed
    assert chat.report_dir != responses.report_dir
    assert chat.metrics["success_rate"] == responses.metrics["success_rate"] == 1.0
    assert "--label" in chat.command and "--timeout-s" in responses.command
    assert responses.row("responses") is not None
    # The marker's run count, or the call's.
    assert len(tracefault_run(EXAMPLE, runs=1).runs) == 1


def example_agent_function():
    """The example agent as a function: the plugin runs it in a fresh interpreter per run."""
    sys.path.insert(0, str(REPO / "examples"))
    import openai_agent

    return openai_agent.main()


@pytest.mark.tracefault(str(SCENARIO), runs=2)
def test_a_module_level_function_is_an_agent(tracefault_run):
    r = tracefault_run(example_agent_function)
    assert r.label == "example_agent_function"
    assert r.command[-5:-3] == ["-m", "tracefault._agent"]
    r.assert_passed()
    assert r.metrics["success_rate"] == 1.0


def test_exec_agent_without_pytest_fixtures(tmp_path):
    r = exec_agent(SCENARIO, " ".join(EXAMPLE), runs=1, out=tmp_path / "out")
    assert r.passed and r.report_dir == tmp_path / "out"
    with pytest.raises(TypeError, match="unknown option"):
        exec_agent(SCENARIO, EXAMPLE, no_such_flag=1)
    with pytest.raises(TypeError, match="top level"):
        exec_agent(SCENARIO, lambda: 0)


# ---- failing checks fail the test, in pytest's terms --------------------------------------------


@pytest.mark.tracefault(str(SCENARIO), runs=3, cmd=NAIVE + ["--traceback"])
def test_a_raw_traceback_fails_check_5(tracefault_result):
    r = tracefault_result
    assert r.exit_code == 1 and not r.passed
    assert not r.check(5).passed and r.check(5).failing_runs == [0, 1, 2]
    with pytest.raises(pytest.fail.Exception) as failed:
        r.assert_no_raw_exception_reaches_model()
    msg = str(failed.value)
    assert "tracefault: FAIL 5. no raw exception text reaches the model" in msg
    assert "run 0: the result of call_000001 shows the model a raw exception" in msg
    # The failing run's own output, its log, the reports and the command that reproduces it.
    assert "the agent's output in run 0" in msg and "agent-run-0.log" in msg
    assert f"reports: {r.report_dir}" in msg and "reproduce: " in msg and " exec " in msg
    # Checks that held still pass.
    r.assert_never_retries_terminal_failures()
    with pytest.raises(pytest.fail.Exception, match="tracefault: FAIL 5[.]"):
        r.assert_checks_pass()


@pytest.mark.tracefault(str(SCENARIO), runs=3, cmd=NAIVE + ["--blind-retry"])
def test_a_blind_retry_fails_check_2_in_the_run_that_did_it(tracefault_result):
    r = tracefault_result
    r.assert_no_raw_exception_reaches_model()
    with pytest.raises(pytest.fail.Exception) as failed:
        r.assert_never_retries_terminal_failures()
    assert r.check("no_blind_retry").failing_runs == [2]
    assert 'run 2: search {"query":"weather Paris"}: retried after a non-retryable bad_args failure' in str(failed.value)
    with pytest.raises(pytest.fail.Exception, match="6. the agent terminates"):
        r.assert_terminates()
    with pytest.raises(pytest.fail.Exception, match="tracefault metric success_rate"):
        r.assert_metric("success_rate", min=0.9)


def test_a_failing_check_is_a_failed_test(pytester, plugin_args):
    """In a pytest session of its own: the report says FAILED, with the check and the run."""
    pytester.makepyfile(
        test_agent=f"""
        import pytest

        @pytest.mark.tracefault({str(SCENARIO)!r}, runs=2, cmd={NAIVE + ["--exit", "3"]!r})
        def test_exit_status(tracefault_result):
            tracefault_result.assert_exits_cleanly()

        @pytest.mark.tracefault({str(SCENARIO)!r}, runs=2, cmd={EXAMPLE!r})
        def test_good_agent(tracefault_result):
            tracefault_result.assert_passed()
        """
    )
    result = pytester.runpytest(*plugin_args, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_exit_status*",
            "*Failed: tracefault: FAIL 7. the agent exits with status 0",
            "*run 0: the agent exited with 3",
            "*run 1: the agent exited with 3",
            "*reproduce: *exec*--runs 2*",
            "*FAILED test_agent.py::test_exit_status*",
        ]
    )
    # The helper's own frames are hidden: the traceback stops at the test's line.
    assert "_exec.py" not in result.stdout.str()


def test_bad_scenario_and_unknown_marker_option_are_reported(pytester, plugin_args):
    bad = pytester.path / "bad.toml"
    bad.write_text('name = "x"\nnot_a_key = 1\n')
    pytester.makepyfile(
        test_bad=f"""
        import pytest

        @pytest.mark.tracefault({str(bad)!r}, cmd=["true"])
        def test_bad_scenario(tracefault_result):
            pass

        @pytest.mark.tracefault({str(SCENARIO)!r}, cmd=["true"], bogus=1)
        def test_bad_option(tracefault_result):
            pass

        def test_no_marker(tracefault_result):
            pass
        """
    )
    result = pytester.runpytest(*plugin_args, "-p", "no:cacheprovider")
    out = result.stdout.str()
    assert "tracefault exec exited 2 without a report" in out
    assert "unknown option(s) bogus" in out
    assert "tracefault_run: no agent" in out
    assert result.ret != 0


def test_marker_is_registered(pytester, plugin_args):
    result = pytester.runpytest(*plugin_args, "--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.tracefault(scenario, runs=1, cmd=None, **options)*"])
    help_out = pytester.runpytest(*plugin_args, "--help").stdout.str()
    assert "--tracefault-bin" in help_out


# ---- tracefault_serve: the test's environment points at the mocks -------------------------------


@pytest.mark.tracefault(str(SCENARIO))
def test_serve_points_the_environment_at_the_mocks(tracefault_serve):
    server = tracefault_serve
    assert server.url.startswith("http://127.0.0.1:")
    for key in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "GOOGLE_GEMINI_BASE_URL", "TRACEFAULT_TOOLS_URL",
                "OPENAI_API_KEY"):
        assert os.environ[key] == server.env[key]
    assert os.environ["OPENAI_BASE_URL"] == server.url + "/v1"
    assert "127.0.0.1" in os.environ["NO_PROXY"]
    # The mock tools answer, and an SDK client made in the test talks to the mock model.
    with urllib.request.urlopen(server.tools_url, timeout=10) as resp:
        tools = json.loads(resp.read())["tools"]
    assert [t["name"] for t in tools] == ["search"]
    from openai import OpenAI

    reply = OpenAI().chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "user", "content": "Please do the task."}],
        tools=[{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                 "parameters": t["input_schema"]}} for t in tools],
    )
    assert reply.choices[0].message.tool_calls[0].function.name == "search"
    # The example agent, started with the test's environment, finishes against the same mocks.
    done = subprocess.run(EXAMPLE, env=dict(os.environ), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_serve_is_stopped_and_the_environment_restored(pytester, plugin_args):
    pytester.makepyfile(
        test_serve=f"""
        import os, pytest
        seen = {{}}

        @pytest.mark.tracefault({str(SCENARIO)!r}, time_scale=0.01)
        def test_one(tracefault_serve):
            seen["url"] = os.environ["TRACEFAULT_BASE_URL"]
            seen["server"] = tracefault_serve

        def test_after():
            assert os.environ.get("TRACEFAULT_BASE_URL") != seen["url"]
            assert seen["server"].process.poll() is not None
        """
    )
    pytester.runpytest(*plugin_args, "-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_serve_context_manager():
    with tracefault.serve(SCENARIO, time_scale=0.5) as server:
        assert server.process.poll() is None
        assert server.mcp_url == server.url + "/mcp"
        with urllib.request.urlopen(server.tools_url, timeout=10) as resp:
            assert resp.status == 200
    # Stopped (by Ctrl-C; its exit status is not checked: a SIGINT that comes before serve has
    # set its handler ends it by the signal).
    assert server.process.poll() is not None
    with pytest.raises(tracefault.TracefaultError, match="did not start"):
        tracefault.serve(REPO / "no-such-scenario.toml")


# ---- the binary and `python -m tracefault` -------------------------------------------------------


def test_binary_and_python_dash_m():
    binary = find_tracefault_bin()
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout
    assert version.startswith("tracefault ")
    via_python = subprocess.run([sys.executable, "-m", "tracefault", "--version"], capture_output=True, text=True)
    assert via_python.returncode == 0 and via_python.stdout == version
    # Exit codes pass through.
    bad = subprocess.run([sys.executable, "-m", "tracefault", "validate", "no-such.toml"], capture_output=True)
    assert bad.returncode == 2


def test_tracefault_bin_is_an_explicit_choice(monkeypatch, tmp_path):
    monkeypatch.setenv("TRACEFAULT_BIN", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="TRACEFAULT_BIN"):
        find_tracefault_bin()
    monkeypatch.delenv("TRACEFAULT_BIN")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr("tracefault._bin._candidates", lambda: [])
    with pytest.raises(FileNotFoundError, match="no tracefault binary"):
        find_tracefault_bin()


@pytest.mark.skipif(not os.environ.get("TRACEFAULT_EXPECT_INSTALLED"), reason="scripts/wheel.sh: the wheel installed")
def test_the_plugin_and_binary_come_from_the_wheel(pytestconfig):
    """In scripts/wheel.sh's fresh virtualenv: the package, its plugin and its binary are the
    wheel's, not the source tree's."""
    from conftest import INSTALLED

    assert INSTALLED
    prefix = os.path.realpath(sys.prefix)
    assert os.path.realpath(tracefault.__file__).startswith(prefix)
    assert pytestconfig.pluginmanager.get_plugin("tracefault") is not None  # the entry point's name
    assert "TRACEFAULT_BIN" not in os.environ
    assert os.path.realpath(find_tracefault_bin()) == os.path.join(prefix, "bin", "tracefault")
