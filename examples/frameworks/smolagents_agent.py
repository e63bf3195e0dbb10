"""An agent on smolagents (`ToolCallingAgent`, which asks with `tool_choice: "required"` and ends by
calling its `final_answer` tool, and hands tool results back as plain messages), with tools
typed from the mock tools' input schemas, for `tracefault exec`:

    tracefault exec SCENARIO -- .venv/bin/python examples/frameworks/smolagents_agent.py \
        --api chat [--stream]
"""

import os
import sys

from smolagents import OpenAIServerModel, Tool, ToolCallingAgent

import tf_tools

STREAM = "--stream" in sys.argv
TYPES = {"string", "integer", "number", "boolean", "object", "array"}


def typed_tool(name, description, schema):
    required = set(schema.get("required", []))
    inputs = {}
    for key, prop in schema.get("properties", {}).items():
        spec = {"type": prop.get("type") if prop.get("type") in TYPES else "any", "description": key}
        if key not in required:
            spec["nullable"] = True
        inputs[key] = spec

    def forward(self, **kwargs):
        return tf_tools.call(name, {k: v for k, v in kwargs.items() if v is not None})

    attrs = {"name": name, "description": description, "inputs": inputs, "output_type": "string",
             "forward": forward, "skip_forward_signature_validation": True}
    return type(f"MockTool_{name}", (Tool,), attrs)()


def main():
    model = OpenAIServerModel(model_id="gpt-4o", api_base=os.environ["OPENAI_BASE_URL"],
                              api_key=os.environ.get("OPENAI_API_KEY", "placeholder"))
    agent = ToolCallingAgent(tools=[typed_tool(*t) for t in tf_tools.tools()], model=model,
                             max_steps=10, verbosity_level=0, stream_outputs=STREAM)
    print(agent.run(tf_tools.PROMPT))


if __name__ == "__main__":
    main()
