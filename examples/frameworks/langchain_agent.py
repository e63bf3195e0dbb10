"""An agent on LangChain's `create_agent` (LangGraph underneath) with typed tools (JSON-schema
args from the mock tools' input schemas), for `tracefault exec`:

    tracefault exec SCENARIO -- .venv/bin/python examples/frameworks/langchain_agent.py \
        --api chat|responses|anthropic|gemini [--stream] [--chain]

`--chain` sets `use_previous_response_id` on ChatOpenAI (Responses only). The base URLs and
keys come from the environment `exec` sets (OPENAI_API_BASE, ANTHROPIC_API_URL,
GOOGLE_GEMINI_BASE_URL).
"""

import sys

from langchain.agents import create_agent
from langchain_core.tools import StructuredTool

import tf_tools

API = tf_tools.flag("api") or "chat"
STREAM = "--stream" in sys.argv
CHAIN = "--chain" in sys.argv


def model():
    if API in ("chat", "responses"):
        from langchain_openai import ChatOpenAI
        return ChatOpenAI(model="gpt-4o", use_responses_api=API == "responses",
                          use_previous_response_id=CHAIN, streaming=STREAM)
    if API == "anthropic":
        from langchain_anthropic import ChatAnthropic
        return ChatAnthropic(model="claude-sonnet-4-5", streaming=STREAM)
    from langchain_google_genai import ChatGoogleGenerativeAI
    return ChatGoogleGenerativeAI(model="gemini-2.5-flash", streaming=STREAM)


def typed_tool(name, description, schema):
    def run(**kwargs):
        return tf_tools.call(name, kwargs)
    return StructuredTool.from_function(run, name=name, description=description, args_schema=schema)


def main():
    agent = create_agent(model(), tools=[typed_tool(*t) for t in tf_tools.tools()])
    inputs = {"messages": [{"role": "user", "content": tf_tools.PROMPT}]}
    if STREAM:
        state = None
        for state in agent.stream(inputs, stream_mode="values"):
            pass
    else:
        state = agent.invoke(inputs)
    print(state["messages"][-1].text)


if __name__ == "__main__":
    main()
