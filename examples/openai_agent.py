"""An agent on the official `openai` SDK (Chat Completions), for `tracefault exec`.

    tracefault exec scenarios/01-worked-example.toml -- python examples/openai_agent.py [--stream]

The SDK reads OPENAI_BASE_URL and OPENAI_API_KEY from the environment `exec` sets.
"""

import json
import sys

from openai import OpenAI

from tools_client import call_tool

STREAM = "--stream" in sys.argv


def ask(client, messages):
    if not STREAM:
        msg = client.chat.completions.create(model="gpt-4o", messages=messages).choices[0].message
        calls = [{"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
                 for c in (msg.tool_calls or [])]
        return msg.content, calls
    text, calls = "", {}
    stream = client.chat.completions.create(model="gpt-4o", messages=messages, stream=True,
                                            stream_options={"include_usage": True})
    for chunk in stream:
        for choice in chunk.choices:
            d = choice.delta
            text += d.content or ""
            for tc in d.tool_calls or []:
                c = calls.setdefault(tc.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
                c["id"] = tc.id or c["id"]
                if tc.function:
                    c["function"]["name"] += tc.function.name or ""
                    c["function"]["arguments"] += tc.function.arguments or ""
    return text or None, [calls[i] for i in sorted(calls)]


def main():
    client = OpenAI()
    messages = [{"role": "user", "content": "Please do the task."}]
    for _ in range(50):
        text, calls = ask(client, messages)
        if not calls:
            print(text)
            return 0
        messages.append({"role": "assistant", "content": text, "tool_calls": calls})
        for c in calls:
            result, _, _ = call_tool(c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": result})
    return 4


if __name__ == "__main__":
    sys.exit(main())
