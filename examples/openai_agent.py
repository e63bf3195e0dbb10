"""An agent on the official `openai` SDK, for `tracefault exec`.

    tracefault exec scenarios/01-worked-example.toml -- python examples/openai_agent.py [--stream]
        [--api responses] [--gemini-compat]

Chat Completions by default; `--api responses` uses the Responses API; `--gemini-compat` talks
Chat Completions to Gemini's OpenAI-compatible endpoint. The SDK reads OPENAI_BASE_URL and
OPENAI_API_KEY from the environment `exec` sets.
"""

import json
import os
import sys

from openai import OpenAI

from tools_client import call_tool, openai_chat_tools, openai_responses_tools

STREAM = "--stream" in sys.argv
RESPONSES = "--api" in sys.argv and sys.argv[sys.argv.index("--api") + 1] == "responses"
GEMINI_COMPAT = "--gemini-compat" in sys.argv


def run_responses(client):
    items = [{"role": "user", "content": "Please do the task."}]
    tools = openai_responses_tools()
    for _ in range(50):
        if STREAM:
            with client.responses.stream(model="gpt-4o", input=items, tools=tools) as stream:
                resp = stream.get_final_response()
        else:
            resp = client.responses.create(model="gpt-4o", input=items, tools=tools)
        calls = [o for o in resp.output if o.type == "function_call"]
        if not calls:
            print(resp.output_text)
            return 0
        for c in calls:
            items.append({"type": "function_call", "call_id": c.call_id, "name": c.name, "arguments": c.arguments})
        for c in calls:
            result, _, _ = call_tool(c.name, json.loads(c.arguments or "{}"))
            items.append({"type": "function_call_output", "call_id": c.call_id, "output": result})
    return 4


def ask(client, messages):
    tools = openai_chat_tools()
    if not STREAM:
        msg = client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools).choices[0].message
        calls = [{"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
                 for c in (msg.tool_calls or [])]
        return msg.content, calls
    text, calls = "", {}
    stream = client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools, stream=True,
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
    if GEMINI_COMPAT:
        base = os.environ["GOOGLE_GEMINI_BASE_URL"].rstrip("/") + "/v1beta/openai/"
        client = OpenAI(base_url=base, api_key=os.environ.get("GEMINI_API_KEY", "placeholder"))
    else:
        client = OpenAI()
    if RESPONSES:
        return run_responses(client)
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
