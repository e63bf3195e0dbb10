#!/usr/bin/env bash
# Installs the official SDKs and agent frameworks the wire-mode tests drive into .venv, at the
# versions examples/requirements.txt and examples/constraints.txt pin (LlamaIndex into
# .venv-llamaindex, by examples/requirements-llamaindex.txt). Idempotent: it reinstalls
# only when those files change.
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
# LlamaIndex in a virtualenv of its own: its OpenAI integration needs openai<3.
if [ ! -x .venv-llamaindex/bin/python ]; then
  python3 -m venv .venv-llamaindex
fi
want=$(cat examples/requirements-llamaindex.txt examples/constraints-llamaindex.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat .venv-llamaindex/.tracefault-installed 2>/dev/null)" != "$want" ]; then
  .venv-llamaindex/bin/pip install --quiet --disable-pip-version-check -r examples/requirements-llamaindex.txt \
    -c examples/constraints-llamaindex.txt
  echo "$want" > .venv-llamaindex/.tracefault-installed
fi
.venv-llamaindex/bin/python -c 'from importlib.metadata import version; print("llama-index-core", version("llama-index-core"), "(.venv-llamaindex)")'

