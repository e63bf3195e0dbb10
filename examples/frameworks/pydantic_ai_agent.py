"""An agent on pydantic-ai with typed tools (from the mock tools' input schemas), for
`tracefault exec`:

    tracefault exec SCENARIO -- .venv/bin/python examples/frameworks/pydantic_ai_agent.py \
        --api chat|responses|anthropic|gemini [--stream]
"""

import asyncio
import os
import sys

from pydantic_ai import Agent, Tool

import tf_tools

API = tf_tools.flag("api") or "chat"
STREAM = "--stream" in sys.argv


def model():
    if API == "chat":
        from pydantic_ai.models.openai import OpenAIChatModel
        return OpenAIChatModel("gpt-4o")
    if API == "responses":
        from pydantic_ai.models.openai import OpenAIResponsesModel
        return OpenAIResponsesModel("gpt-4o")
    if API == "anthropic":
        from pydantic_ai.models.anthropic import AnthropicModel
        return AnthropicModel("claude-sonnet-4-5")
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider
    from google.genai import types
    provider = GoogleProvider(api_key=os.environ["GEMINI_API_KEY"],
                              base_url=os.environ["GOOGLE_GEMINI_BASE_URL"])
    return GoogleModel("gemini-2.5-flash", provider=provider)


def typed_tool(name, description, schema):
    def run(**kwargs):
        return tf_tools.call(name, kwargs)
    return Tool.from_schema(run, name=name, description=description, json_schema=schema)


async def main():
    agent = Agent(model(), tools=[typed_tool(*t) for t in tf_tools.tools()])
    if STREAM:
        async with agent.run_stream(tf_tools.PROMPT) as run:
            text = await run.get_output()
    else:
        text = (await agent.run(tf_tools.PROMPT)).output
    print(text)


if __name__ == "__main__":
    asyncio.run(main())
