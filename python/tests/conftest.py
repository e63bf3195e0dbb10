"""The plugin's tests: run from the repository (they use its scenarios and example agents).

With the wheel installed, pytest loads the plugin through its `pytest11` entry point; from a
source tree (PYTHONPATH=python), this file loads it.
"""

import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "scenarios" / "01-worked-example.toml"
EXAMPLE = [sys.executable, str(REPO / "examples" / "openai_agent.py")]
NAIVE = [sys.executable, str(Path(__file__).resolve().parent / "agents" / "naive_agent.py")]


def _installed() -> bool:
    eps = entry_points()
    group = eps.select(group="pytest11") if hasattr(eps, "select") else eps.get("pytest11", [])
    return any(ep.name == "tracefault" for ep in group)


INSTALLED = _installed()
# What an inner pytest run (pytester) needs to load the plugin.
PLUGIN_ARGS = [] if INSTALLED else ["-p", "tracefault.pytest_plugin"]

pytest_plugins = ["pytester"] + ([] if INSTALLED else ["tracefault.pytest_plugin"])


@pytest.fixture
def plugin_args():
    return list(PLUGIN_ARGS)
