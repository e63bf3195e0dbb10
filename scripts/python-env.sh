#!/usr/bin/env bash
# Installs the official SDKs and agent frameworks the wire-mode tests drive into .venv, at the
# versions examples/requirements.txt and examples/constraints.txt pin (LlamaIndex into
# .venv-llamaindex, by examples/requirements-llamaindex.txt; Strands Agents into .venv-strands and
# Google ADK into .venv-adk, likewise). Idempotent: it reinstalls only when those files change.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
want=$(cat examples/requirements.txt examples/constraints.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat .venv/.tracefault-installed 2>/dev/null)" != "$want" ]; then
  .venv/bin/pip install --quiet --disable-pip-version-check -r examples/requirements.txt -c examples/constraints.txt
  echo "$want" > .venv/.tracefault-installed
fi
.venv/bin/python - <<'PY'
from importlib.metadata import version
names = ["openai", "anthropic", "google-genai", "pydantic-ai-slim", "openai-agents", "langchain", "litellm",
         "smolagents", "autogen-agentchat", "agno", "haystack-ai"]
print("python SDKs and frameworks:", " · ".join(f"{n} {version(n)}" for n in names))
PY
# A virtualenv of its own for a framework whose pins conflict with the main one: $1 the venv,
# $2 its name in examples/requirements-$2.txt and constraints-$2.txt, $3 the package to report.
own_venv() {
  if [ ! -x "$1/bin/python" ]; then
    python3 -m venv "$1"
  fi
  local want
  want=$(cat "examples/requirements-$2.txt" "examples/constraints-$2.txt" | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$1/.tracefault-installed" 2>/dev/null)" != "$want" ]; then
    "$1/bin/pip" install --quiet --disable-pip-version-check -r "examples/requirements-$2.txt" \
      -c "examples/constraints-$2.txt"
    echo "$want" > "$1/.tracefault-installed"
  fi
  "$1/bin/python" -c "from importlib.metadata import version; print('$3', version('$3'), '($1)')"
}
# LlamaIndex: its OpenAI integration needs openai<3.
own_venv .venv-llamaindex llamaindex llama-index-core
# Strands Agents: it needs mcp<2.2 (and openai<3, anthropic<1).
own_venv .venv-strands strands strands-agents
# Google ADK: it needs opentelemetry-api<=1.44 and websockets<16.
own_venv .venv-adk adk google-adk
