"""An agent on Agno (`Agent` with `OpenAIChat`), with tools typed from the mock tools' input
schemas, for `tracefault exec`:

    tracefault exec SCENARIO -- .venv/bin/python examples/frameworks/agno_agent.py --api chat [--stream]

Agno sends telemetry to its own host on every run unless told not to (`telemetry=False`, or
AGNO_TELEMETRY=false): `exec`'s check 8 fails such a run. `--telemetry` leaves it on, to see that.
"""

import sys

from agno.agent import Agent
from agno.models.openai import OpenAIChat
from agno.tools.function import Function

import tf_tools

STREAM = "--stream" in sys.argv
TELEMETRY = "--telemetry" in sys.argv


def typed_tool(name, description, schema):
    def run(**kwargs):
        return tf_tools.call(name, kwargs)
    return Function(name=name, description=description, parameters=schema, entrypoint=run,
                    skip_entrypoint_processing=True)


def main():
    agent = Agent(model=OpenAIChat(id="gpt-4o"), tools=[typed_tool(*t) for t in tf_tools.tools()],
                  telemetry=TELEMETRY)
    if STREAM:
        text = ""
        for event in agent.run(tf_tools.PROMPT, stream=True):
            if getattr(event, "event", "") == "RunContent" and isinstance(getattr(event, "content", None), str):
                text += event.content
        print(text)
    else:
        print(agent.run(tf_tools.PROMPT).content)


if __name__ == "__main__":
    main()
