"""An agent on Google ADK (`LlmAgent` with its `Gemini` model, run by a `Runner` over an
`InMemorySessionService`), with tools typed from the mock tools' input schemas, for
`tracefault exec`. ADK pins `opentelemetry-api<=1.44` and `websockets<16`, so it has a virtualenv
of its own (`.venv-adk`, made by scripts/python-env.sh):

    tracefault exec SCENARIO -- .venv-adk/bin/python examples/frameworks/adk_agent.py \
        --api gemini [--stream]

`--stream` runs with `RunConfig(streaming_mode=StreamingMode.SSE)` (streamGenerateContent). The
example caps a run at 20 model calls (`RunConfig.max_llm_calls`; ADK's default is 500), past which
ADK raises `LlmCallsLimitExceededError`: the agent exits 1. ADK exports no telemetry unless an
exporter is set up (its CLI's flags, OTEL_EXPORTER_OTLP_* or Agent Engine variables), and with an
API key it asks no GCP metadata server for a project.
"""

import asyncio
import os
import sys

from google.adk.agents import LlmAgent
from google.adk.agents.run_config import RunConfig, StreamingMode
from google.adk.models.google_llm import Gemini
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.base_tool import BaseTool
from google.genai import types

import tf_tools

STREAM = "--stream" in sys.argv


class SchemaTool(BaseTool):
    """A tool declared with the mock tool's own JSON schema; its result is what the tool answered."""

    def __init__(self, name, description, schema):
        super().__init__(name=name, description=description)
        self.schema = schema

    def _get_declaration(self):
        return types.FunctionDeclaration(name=self.name, description=self.description,
                                         parameters_json_schema=self.schema)

    async def run_async(self, *, args, tool_context):
        return await asyncio.to_thread(tf_tools.call, self.name, dict(args))


async def main():
    model = Gemini(model="gemini-2.5-flash", base_url=os.environ["GOOGLE_GEMINI_BASE_URL"])
    agent = LlmAgent(name="tracefault_agent", model=model,
                     tools=[SchemaTool(*t) for t in tf_tools.tools()])
    runner = Runner(agent=agent, app_name="tracefault", session_service=InMemorySessionService())
    session = await runner.session_service.create_session(app_name="tracefault", user_id="user")
    config = RunConfig(streaming_mode=StreamingMode.SSE if STREAM else StreamingMode.NONE, max_llm_calls=20)
    message = types.Content(role="user", parts=[types.Part(text=tf_tools.PROMPT)])
    text = ""
    async for event in runner.run_async(user_id="user", session_id=session.id, new_message=message,
                                        run_config=config):
        if event.is_final_response() and not event.partial and event.content and event.content.parts:
            text = "".join(p.text or "" for p in event.content.parts if not p.thought)
    print(text)


if __name__ == "__main__":
    asyncio.run(main())
