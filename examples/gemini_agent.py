"""An agent on the official `google-genai` SDK (generateContent), for `tracefault exec`.

    tracefault exec scenarios/01-worked-example.toml -- python examples/gemini_agent.py [--stream]

Failures go back as functionResponse.response = {"error": <five-field envelope>}.
"""

import os
import sys

from google import genai
from google.genai import types

from tools_client import call_tool, list_tools

STREAM = "--stream" in sys.argv


def ask(client, contents):
    declarations = [types.FunctionDeclaration(name=t["name"], description=t["description"],
                                              parameters_json_schema=t["input_schema"]) for t in list_tools()]
    config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=declarations)],
                                         automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))
    if not STREAM:
        return client.models.generate_content(model="gemini-2.5-flash", contents=contents, config=config).candidates[0].content.parts
    parts = []
    for chunk in client.models.generate_content_stream(model="gemini-2.5-flash", contents=contents, config=config):
        for c in chunk.candidates or []:
            parts.extend(c.content.parts or [])
    return parts


def main():
    client = genai.Client(api_key=os.environ.get("GEMINI_API_KEY", "placeholder"),
                          http_options=types.HttpOptions(base_url=os.environ["GOOGLE_GEMINI_BASE_URL"]))
    contents = [types.Content(role="user", parts=[types.Part(text="Please do the task.")])]
    for _ in range(50):
        parts = ask(client, contents)
        contents.append(types.Content(role="model", parts=parts))
        calls = [p.function_call for p in parts if p.function_call]
        if not calls:
            print("".join(p.text or "" for p in parts))
            return 0
        responses = []
        for fc in calls:
            text, failed, envelope = call_tool(fc.name, dict(fc.args or {}))
            import json
            response = {"error": envelope} if failed else {"output": json.loads(text)}
            responses.append(types.Part(function_response=types.FunctionResponse(id=fc.id, name=fc.name, response=response)))
        contents.append(types.Content(role="user", parts=responses))
    return 4


if __name__ == "__main__":
    sys.exit(main())
