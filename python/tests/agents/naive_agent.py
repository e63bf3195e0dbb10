"""A careless agent on the official `openai` SDK, for the plugin's failing-check tests.

    naive_agent.py [--traceback] [--blind-retry] [--exit N]

--traceback: a failed tool call goes back to the model as the Python traceback (check 5 fails).
--blind-retry: a failed tool call is re-sent at once, identical, whatever the failure (check 2
fails on a non-retryable one). --exit N: exit with status N after answering (check 7 fails).
"""

import json
import os
import sys
import traceback
import urllib.error
import urllib.request

from openai import OpenAI

TOOLS_URL = os.environ["TRACEFAULT_TOOLS_URL"]


def post(name, args):
    req = urllib.request.Request(f"{TOOLS_URL}/{name}", data=json.dumps(args).encode(),
                                 headers={"content-type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read().decode()


def call_tool(name, args):
    try:
        return post(name, args)
    except urllib.error.HTTPError:
        if "--blind-retry" in sys.argv:
            try:
                return post(name, args)
            except urllib.error.HTTPError:
                pass
        if "--traceback" in sys.argv:
            return traceback.format_exc()
        return json.dumps({"error": f"{name} failed"})


def main():
    with urllib.request.urlopen(TOOLS_URL, timeout=30) as r:
        tools = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                   "parameters": t["input_schema"]}}
                 for t in json.loads(r.read().decode())["tools"]]
    client = OpenAI()
    messages = [{"role": "user", "content": "Please do the task."}]
    for _ in range(20):
        msg = client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools).choices[0].message
        if not msg.tool_calls:
            print(msg.content)
            return int(sys.argv[sys.argv.index("--exit") + 1]) if "--exit" in sys.argv else 0
        messages.append({"role": "assistant", "content": msg.content, "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in msg.tool_calls]})
        for c in msg.tool_calls:
            result = call_tool(c.function.name, json.loads(c.function.arguments or "{}"))
            messages.append({"role": "tool", "tool_call_id": c.id, "content": result})
    return 4


if __name__ == "__main__":
    sys.exit(main())
