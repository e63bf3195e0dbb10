"""An agent whose tools come over MCP, on the official Python MCP SDK (`mcp`), with the model
from the OpenAI SDK, for `tracefault exec`:

    tracefault exec SCENARIO [--mcp-strategy mcp-text|mcp-envelope|jsonrpc-error] -- \
        .venv/bin/python examples/mcp/mcp_sdk_agent.py

It lists the tools at $TRACEFAULT_MCP_URL (streamable HTTP), declares them to the model, and
hands each tool result back the way a plain host does: a result's text content (an `isError`
result included), and for a call that raised (a JSON-RPC error, an HTTP failure of the
endpoint) the exception's message. It never retries on its own. When the server says
`notifications/tools/list_changed` it lists the tools again before the next model turn, as a
well-behaved host does. On stderr it writes one line per tool call saying how the call ended
(`mcp-call TOOL: ok|is_error|raised TYPE`) and `mcp-relisted` after listing again, which the
tests read.
"""

import asyncio
import json
import os
import sys

import mcp.types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from openai import OpenAI

MAX_TURNS = 12


async def call(session, name, args):
    """(text for the model, how the call ended)."""
    try:
        result = await session.call_tool(name, args)
    except Exception as e:  # a JSON-RPC error, or the endpoint failed
        return f"Error: {e}", f"raised {type(e).__name__}"
    text = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    return text, "is_error" if result.is_error else "ok"


async def declared(session):
    """The server's tools, declared to the model."""
    listed = await session.list_tools()
    return [{"type": "function", "function": {"name": t.name, "description": t.description or "",
                                              "parameters": t.input_schema}} for t in listed.tools]


async def main():
    model = OpenAI()
    changed = asyncio.Event()

    async def on_message(message):
        if isinstance(message, mcp.types.ToolListChangedNotification):
            changed.set()

    async with streamable_http_client(os.environ["TRACEFAULT_MCP_URL"]) as streams:
        async with ClientSession(streams[0], streams[1], message_handler=on_message) as session:
            await session.initialize()
            tools = await declared(session)
            messages = [{"role": "user", "content": "Please do the task."}]
            for _ in range(MAX_TURNS):
                if changed.is_set():
                    changed.clear()
                    tools = await declared(session)
                    print("mcp-relisted", file=sys.stderr, flush=True)
                reply = model.chat.completions.create(model="gpt-4o", messages=messages, tools=tools)
                msg = reply.choices[0].message
                messages.append(msg.model_dump(exclude_none=True))
                if not msg.tool_calls:
                    print(msg.content)
                    return
                for tc in msg.tool_calls:
                    text, ended = await call(session, tc.function.name, json.loads(tc.function.arguments or "{}"))
                    print(f"mcp-call {tc.function.name}: {ended}", file=sys.stderr, flush=True)
                    messages.append({"role": "tool", "tool_call_id": tc.id, "content": text})
            print("gave up after", MAX_TURNS, "turns")


if __name__ == "__main__":
    asyncio.run(main())
