#!/usr/bin/env bash
# Installs the official SDKs and agent frameworks the wire-mode tests drive into .venv, at the
# versions examples/requirements.txt and examples/constraints.txt pin. Idempotent: it reinstalls
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
