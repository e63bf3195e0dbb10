"""An agent on AutoGen AgentChat (`AssistantAgent`, up to 10 tool iterations, then a reflection
on the tool results: a request that declares no tools), with tools typed from the mock tools'
input schemas, for `tracefault exec`:

    tracefault exec SCENARIO -- .venv/bin/python examples/frameworks/autogen_agent.py \
        --api chat [--stream]
"""

import asyncio
import os
import sys

from autogen_agentchat.agents import AssistantAgent
from autogen_core import CancellationToken
from autogen_core.tools import BaseTool
from autogen_ext.models.openai import OpenAIChatCompletionClient
from pydantic import BaseModel, create_model

import tf_tools

STREAM = "--stream" in sys.argv
PY_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "object": dict, "array": list}


class MockTool(BaseTool[BaseModel, str]):
    """A mock tool: its arguments typed from the tool's input schema."""

    def __init__(self, name, description, schema):
        required = set(schema.get("required", []))
        fields = {}
        for key, prop in schema.get("properties", {}).items():
            ty = PY_TYPES.get(prop.get("type"), str)
            fields[key] = (ty, ...) if key in required else (ty | None, None)
        super().__init__(create_model(f"{name}_args", **fields), str, name, description)

    async def run(self, args: BaseModel, cancellation_token: CancellationToken) -> str:
        return await asyncio.to_thread(tf_tools.call, self.name, args.model_dump(exclude_none=True))


async def main():
    client = OpenAIChatCompletionClient(model="gpt-4o", base_url=os.environ["OPENAI_BASE_URL"],
                                        api_key=os.environ.get("OPENAI_API_KEY", "placeholder"))
    agent = AssistantAgent("agent", model_client=client, tools=[MockTool(*t) for t in tf_tools.tools()],
                           reflect_on_tool_use=True, max_tool_iterations=10, model_client_stream=STREAM)
    result = await agent.run(task=tf_tools.PROMPT)
    print(result.messages[-1].to_text())
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
