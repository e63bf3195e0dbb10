"""An agent on Strands Agents (`Agent` with its OpenAI, OpenAI Responses, Anthropic or Gemini model
provider), with tools typed from the mock tools' input schemas, for `tracefault exec`. Strands needs
`mcp<2.2` and `openai<3`, so it has a virtualenv of its own (`.venv-strands`, made by
scripts/python-env.sh):

    tracefault exec SCENARIO -- .venv-strands/bin/python examples/frameworks/strands_agent.py \
        --api chat [--stream] | --api responses --stream [--chain] | --api anthropic|gemini --stream

Only the chat provider (`OpenAIModel`) has a non-streaming mode (its `stream` setting); the
Responses, Anthropic and Gemini providers always stream, so they take `--stream` only. `--chain`
makes the Responses provider stateful (`previous_response_id`). The agent loop has no turn limit
of its own: the example sets `limits={"turns": 20}`, after which Strands stops quietly
(`stop_reason="limit_turns"`). Strands sends no telemetry unless an OpenTelemetry exporter is set
up (`StrandsTelemetry`), which the example does not do.
"""

import os
import sys

from strands import Agent
from strands.tools.tools import PythonAgentTool

import tf_tools

API = tf_tools.flag("api") or "chat"
STREAM = "--stream" in sys.argv
CHAIN = "--chain" in sys.argv


def model():
    if API == "chat":
        from strands.models.openai import OpenAIModel
        return OpenAIModel(client_args={"base_url": os.environ["OPENAI_BASE_URL"],
                                        "api_key": os.environ["OPENAI_API_KEY"]},
                           model_id="gpt-4o", stream=STREAM)
    if not STREAM:
        sys.exit(f"strands' {API} provider always streams: pass --stream")
    if API == "responses":
        from strands.models.openai_responses import OpenAIResponsesModel
        return OpenAIResponsesModel(client_args={"base_url": os.environ["OPENAI_BASE_URL"],
                                                 "api_key": os.environ["OPENAI_API_KEY"]},
                                    model_id="gpt-4o", stateful=CHAIN)
    if API == "anthropic":
        from strands.models.anthropic import AnthropicModel
        return AnthropicModel(client_args={"base_url": os.environ["ANTHROPIC_BASE_URL"],
                                           "api_key": os.environ["ANTHROPIC_API_KEY"]},
                              model_id="claude-sonnet-4-5", max_tokens=1024)
    from strands.models.gemini import GeminiModel
    return GeminiModel(client_args={"api_key": os.environ["GEMINI_API_KEY"],
                                    "http_options": {"base_url": os.environ["GOOGLE_GEMINI_BASE_URL"]}},
                       model_id="gemini-2.5-flash")


def typed_tool(name, description, schema):
    def run(tool_use, **_):
        text = tf_tools.call(name, tool_use["input"])
        return {"toolUseId": tool_use["toolUseId"], "status": "success", "content": [{"text": text}]}
    return PythonAgentTool(name, {"name": name, "description": description, "inputSchema": {"json": schema}}, run)


def main():
    agent = Agent(model=model(), tools=[typed_tool(*t) for t in tf_tools.tools()], callback_handler=None)
    result = agent(tf_tools.PROMPT, limits={"turns": 20})
    print(str(result).strip())


if __name__ == "__main__":
    main()
