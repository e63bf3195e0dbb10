"""An agent on LlamaIndex (`FunctionAgent` with its `OpenAI` LLM), with tools typed from the mock
tools' input schemas, for `tracefault exec`. LlamaIndex's OpenAI integration needs `openai<3`, so it
has a virtualenv of its own (`.venv-llamaindex`, made by scripts/python-env.sh):

    tracefault exec SCENARIO -- .venv-llamaindex/bin/python examples/frameworks/llamaindex_agent.py \
        --api chat [--stream]
"""

import asyncio
import os
import sys

from llama_index.core.agent.workflow import AgentStream, FunctionAgent
from llama_index.core.tools import FunctionTool
from llama_index.llms.openai import OpenAI
from pydantic import create_model

import tf_tools

STREAM = "--stream" in sys.argv
PY_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "object": dict, "array": list}


def typed_tool(name, description, schema):
    required = set(schema.get("required", []))
    fields = {}
    for key, prop in schema.get("properties", {}).items():
        ty = PY_TYPES.get(prop.get("type"), str)
        fields[key] = (ty, ...) if key in required else (ty | None, None)

    def run(**kwargs):
        return tf_tools.call(name, {k: v for k, v in kwargs.items() if v is not None})

    return FunctionTool.from_defaults(fn=run, name=name, description=description,
                                      fn_schema=create_model(f"{name}_args", **fields))


async def main():
    llm = OpenAI(model="gpt-4o", api_base=os.environ["OPENAI_BASE_URL"],
                 api_key=os.environ.get("OPENAI_API_KEY", "placeholder"))
    agent = FunctionAgent(tools=[typed_tool(*t) for t in tf_tools.tools()], llm=llm, streaming=STREAM)
    handler = agent.run(tf_tools.PROMPT, max_iterations=20)
    if STREAM:
        async for event in handler.stream_events():
            if isinstance(event, AgentStream):
                pass
    print(str(await handler))


if __name__ == "__main__":
    asyncio.run(main())
