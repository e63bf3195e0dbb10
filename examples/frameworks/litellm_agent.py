"""An agent loop on LiteLLM (one OpenAI-shaped interface to every provider) with the mock tools'
schemas as OpenAI function tools, for `tracefault exec`:

    tracefault exec SCENARIO -- .venv/bin/python examples/frameworks/litellm_agent.py \
        --api openai|anthropic|gemini [--stream] [--max-turns N]

LiteLLM reads the base URLs `exec` sets (OPENAI_BASE_URL, ANTHROPIC_API_BASE, GEMINI_API_BASE).
Like a hand-written loop, it stops after `--max-turns` model calls (default 10).
"""

import json
import os
import sys

# LiteLLM fetches its model price list from GitHub when imported, retrying for seconds where
# the network is closed; the copy it ships is enough here, and nothing leaves the machine.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm  # noqa: E402

import tf_tools

API = tf_tools.flag("api") or "openai"
STREAM = "--stream" in sys.argv
MAX_TURNS = int(tf_tools.flag("max-turns") or 10)
MODEL = {"openai": "openai/gpt-4o", "anthropic": "anthropic/claude-sonnet-4-5",
         "gemini": "gemini/gemini-2.5-flash"}[API]


def complete(messages, tools):
    response = litellm.completion(model=MODEL, messages=messages, tools=tools, stream=STREAM)
    if STREAM:
        response = litellm.stream_chunk_builder(list(response), messages=messages)
    return response.choices[0].message


def main():
    tools = [{"type": "function", "function": {"name": n, "description": d, "parameters": s}}
             for n, d, s in tf_tools.tools()]
    messages = [{"role": "user", "content": tf_tools.PROMPT}]
    for _ in range(MAX_TURNS):
        message = complete(messages, tools)
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            print(message.content)
            return
        for call in message.tool_calls:
            result = tf_tools.call(call.function.name, json.loads(call.function.arguments or "{}"))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    sys.exit(f"stopped after {MAX_TURNS} model calls without an answer")


if __name__ == "__main__":
    main()
