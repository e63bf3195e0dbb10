"""An agent on the OpenAI Agents SDK with typed tools (strict schemas from the mock tools'
input schemas), for `tracefault exec`:

    tracefault exec SCENARIO -- .venv/bin/python examples/frameworks/openai_agents_agent.py \
        --api responses|chat [--stream] [--chain]

`--chain` turns on the SDK's `auto_previous_response_id` (Responses only): each turn sends only
the new items and the id of the previous response.
"""

import asyncio
import json
import sys

from agents import Agent, FunctionTool, Runner, set_default_openai_api

import tf_tools

API = tf_tools.flag("api") or "responses"
STREAM = "--stream" in sys.argv
CHAIN = "--chain" in sys.argv


def typed_tool(name, description, schema):
    async def invoke(_ctx, args_json):
        return tf_tools.call(name, json.loads(args_json))
    return FunctionTool(name=name, description=description, params_json_schema=schema,
                        on_invoke_tool=invoke, strict_json_schema=True)


async def main():
    set_default_openai_api("responses" if API == "responses" else "chat_completions")
    agent = Agent(name="tracefault", instructions="Use the tools to do the task.", model="gpt-4o",
                  tools=[typed_tool(*t) for t in tf_tools.tools()])
    if STREAM:
        run = Runner.run_streamed(agent, tf_tools.PROMPT, auto_previous_response_id=CHAIN)
        async for _ in run.stream_events():
            pass
        text = run.final_output
    else:
        text = (await Runner.run(agent, tf_tools.PROMPT, auto_previous_response_id=CHAIN)).final_output
    print(text)


if __name__ == "__main__":
    asyncio.run(main())
