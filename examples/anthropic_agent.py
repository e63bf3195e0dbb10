"""An agent on the official `anthropic` SDK (Messages), for `tracefault exec`.

    tracefault exec scenarios/01-worked-example.toml -- python examples/anthropic_agent.py [--stream]

Failed tool results carry is_error: true, with the five-field envelope as content.
"""

import sys

import anthropic

from tools_client import anthropic_tools, call_tool

STREAM = "--stream" in sys.argv


def ask(client, messages):
    kwargs = dict(model="claude-sonnet-4-5", max_tokens=1024, messages=messages, tools=anthropic_tools())
    if STREAM:
        with client.messages.stream(**kwargs) as stream:
            return stream.get_final_message()
    return client.messages.create(**kwargs)


def main():
    client = anthropic.Anthropic()
    messages = [{"role": "user", "content": "Please do the task."}]
    for _ in range(50):
        msg = ask(client, messages)
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in msg.content]})
        uses = [b for b in msg.content if b.type == "tool_use"]
        if not uses:
            print("".join(b.text for b in msg.content if b.type == "text"))
            return 0
        results = []
        for u in uses:
            text, failed, _ = call_tool(u.name, u.input)
            block = {"type": "tool_result", "tool_use_id": u.id, "content": text}
            if failed:
                block["is_error"] = True
            results.append(block)
        messages.append({"role": "user", "content": results})
    return 4


if __name__ == "__main__":
    sys.exit(main())
