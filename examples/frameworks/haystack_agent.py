"""An agent on Haystack (`Agent` with `OpenAIChatGenerator`), with tools typed from the mock tools'
input schemas, for `tracefault exec`:

    tracefault exec SCENARIO -- .venv/bin/python examples/frameworks/haystack_agent.py --api chat [--stream]

Haystack sends usage telemetry to its own host unless HAYSTACK_TELEMETRY_ENABLED=False, which
this agent sets (`exec`'s check 8 fails a run that sends it).
"""

import os
import sys

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

from haystack.components.agents import Agent  # noqa: E402
from haystack.components.generators.chat import OpenAIChatGenerator  # noqa: E402
from haystack.dataclasses import ChatMessage  # noqa: E402
from haystack.tools import Tool  # noqa: E402
from haystack.utils import Secret  # noqa: E402

import tf_tools  # noqa: E402

STREAM = "--stream" in sys.argv


def typed_tool(name, description, schema):
    def run(**kwargs):
        return tf_tools.call(name, kwargs)
    return Tool(name=name, description=description, parameters=schema, function=run)


def main():
    printed = []
    generator = OpenAIChatGenerator(model="gpt-4o", api_key=Secret.from_env_var("OPENAI_API_KEY"),
                                    api_base_url=os.environ["OPENAI_BASE_URL"])
    agent = Agent(chat_generator=generator, tools=[typed_tool(*t) for t in tf_tools.tools()], max_agent_steps=20,
                  streaming_callback=(lambda chunk: printed.append(chunk.content or "")) if STREAM else None)
    result = agent.run(messages=[ChatMessage.from_user(tf_tools.PROMPT)])
    print(result["messages"][-1].text)


if __name__ == "__main__":
    main()
