#!/usr/bin/env bash
# Installs the official SDKs the wire-mode tests drive into .venv (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
if ! .venv/bin/python -c "import openai, anthropic, google.genai" 2>/dev/null; then
  .venv/bin/pip install --quiet --disable-pip-version-check -r examples/requirements.txt
fi
.venv/bin/python -c "import openai, anthropic, google.genai; print('python SDKs:', 'openai', openai.__version__, '· anthropic', anthropic.__version__, '· google-genai', google.genai.__version__)"
