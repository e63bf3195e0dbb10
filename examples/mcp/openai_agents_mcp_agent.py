"""An agent on the OpenAI Agents SDK whose tools come from an MCP server over streamable HTTP
(`MCPServerStreamableHttp` at $TRACEFAULT_MCP_URL), with the model at the mock provider
(Chat Completions), for `tracefault exec`:

    tracefault exec SCENARIO [--mcp-strategy …] -- \
        .venv/bin/python examples/mcp/openai_agents_mcp_agent.py

Everything about failures is the SDK's own: an `isError` result reaches the model as its text,
a JSON-RPC error as the SDK's fixed sentence, and nothing is retried.
"""

import asyncio
import os

from agents import Agent, Runner, set_default_openai_api
from agents.mcp import MCPServerStreamableHttp


async def main():
    set_default_openai_api("chat_completions")
    async with MCPServerStreamableHttp(params={"url": os.environ["TRACEFAULT_MCP_URL"]},
                                       name="tracefault", client_session_timeout_seconds=30) as server:
        agent = Agent(name="tracefault", instructions="Use the tools to do the task.", model="gpt-4o",
                      mcp_servers=[server])
        result = await Runner.run(agent, "Please do the task.", max_turns=12)
        print(result.final_output)


if __name__ == "__main__":
    asyncio.run(main())
