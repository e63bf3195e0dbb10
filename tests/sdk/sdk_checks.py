"""Official-SDK behaviour against tracefault's mocks; run through `tracefault exec`.

    sdk_checks.py retry429 openai|anthropic|gemini   the SDK's own retries of a 429 with retry-after
    sdk_checks.py unanswered openai|anthropic|gemini the SDK's BadRequest error for an unanswered call
    sdk_checks.py stream-retry                       a streamed call asked again once when it breaks
    sdk_checks.py stream openai|openai-responses|anthropic|gemini
                                                     one streamed answer read to its end; prints
                                                     "RESULT ok N" (N chunks) or "RESULT <the
                                                     exception's package.class> <its message>"

Exit 0 when the SDK behaved as its documentation says (the caller counts requests separately).
"""

import os
import sys

OPENAI_UNANSWERED = ("An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                     "'tool_call_id'. The following tool_call_ids did not have response messages: call_unanswered1")
ANTHROPIC_UNANSWERED = ("messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
                        "toolu_unanswered1. Each `tool_use` block must have a corresponding `tool_result` block in the next message.")
GEMINI_UNANSWERED = ("Please ensure that the number of function response parts is equal to the number of function call "
                     "parts of the function call turn.")


def openai_check(check):
    import openai
    client = openai.OpenAI()  # default max_retries = 2
    messages = [{"role": "user", "content": "hi"}]
    if check == "unanswered":
        messages += [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_unanswered1", "type": "function", "function": {"name": "search", "arguments": "{}"}}]},
            {"role": "user", "content": "well?"}]
    try:
        client.chat.completions.create(model="gpt-4o", messages=messages)
    except openai.RateLimitError:
        return check == "retry429"
    except openai.BadRequestError as e:
        print("message:", e.body.get("message") if isinstance(e.body, dict) else e.body)
        return check == "unanswered" and e.body.get("message") == OPENAI_UNANSWERED and OPENAI_UNANSWERED in str(e)
    return False


def anthropic_check(check):
    import anthropic
    client = anthropic.Anthropic()  # default max_retries = 2
    messages = [{"role": "user", "content": "hi"}]
    if check == "unanswered":
        messages += [{"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_unanswered1", "name": "search", "input": {}}]},
                     {"role": "user", "content": [{"type": "text", "text": "well?"}]}]
    try:
        client.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=messages)
    except anthropic.RateLimitError:
        return check == "retry429"
    except anthropic.BadRequestError as e:
        print("message:", e.body)
        return check == "unanswered" and e.body["error"]["message"] == ANTHROPIC_UNANSWERED and ANTHROPIC_UNANSWERED in str(e)
    return False


def gemini_check(check):
    from google import genai
    from google.genai import errors, types
    client = genai.Client(api_key=os.environ["GEMINI_API_KEY"], http_options=types.HttpOptions(base_url=os.environ["GOOGLE_GEMINI_BASE_URL"]))
    contents = [types.Content(role="user", parts=[types.Part(text="hi")])]
    if check == "unanswered":
        contents += [types.Content(role="model", parts=[types.Part(function_call=types.FunctionCall(name="search", args={}))]),
                     types.Content(role="user", parts=[types.Part(text="well?")])]
    try:
        client.models.generate_content(model="gemini-2.5-flash", contents=contents)
    except errors.ClientError as e:
        print("error:", e.code, e.message)
        if check == "retry429":
            return e.code == 429  # google-genai does not retry by default
        return e.code == 400 and e.message == GEMINI_UNANSWERED
    return False


def stream_retry():
    """A Chat stream of a call of `search` read to its end, asked again once when it breaks."""
    import openai
    client = openai.OpenAI(timeout=1.0)
    tools = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
    for attempt in (1, 2):
        try:
            chunks = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}],
                                                    tools=tools, stream=True)
            calls = [c.function.name for chunk in chunks for c in (chunk.choices[0].delta.tool_calls or [])
                     if c.function and c.function.name]
            print("RESULT ok", attempt, calls)
            return True
        except openai.APIError as e:
            print("attempt", attempt, type(e).__name__)
    return False


def stream_check(sdk):
    """Reads one streamed answer to its end with the SDK's defaults (a read timeout of 1 s)."""
    if sdk in ("openai", "openai-responses"):
        import openai
        client = openai.OpenAI(timeout=1.0)
        if sdk == "openai":
            chunks = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True)
        else:
            chunks = client.responses.create(model="gpt-4o", input="hi", stream=True)
    elif sdk == "anthropic":
        import anthropic
        client = anthropic.Anthropic(timeout=1.0)
        chunks = client.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}], stream=True)
    else:
        from google import genai
        from google.genai import types
        client = genai.Client(api_key=os.environ["GEMINI_API_KEY"], http_options=types.HttpOptions(
            base_url=os.environ["GOOGLE_GEMINI_BASE_URL"], timeout=1000))
        chunks = client.models.generate_content_stream(model="gemini-2.5-flash", contents="hi")
    try:
        events = sum(1 for _ in chunks)
        print("RESULT ok", events)
    except Exception as e:  # the point is which one
        package = ".".join(p for p in type(e).__module__.split(".") if not p.startswith("_"))
        print("RESULT", f"{package}.{type(e).__name__}", str(e)[:200].replace("\n", " "))
    return True


if __name__ == "__main__":
    if sys.argv[1] == "stream-retry":
        sys.exit(0 if stream_retry() else 1)
    if sys.argv[1] == "stream":
        stream_check(sys.argv[2])
        sys.exit(0)
    check, sdk = sys.argv[1], sys.argv[2]
    ok = {"openai": openai_check, "anthropic": anthropic_check, "gemini": gemini_check}[sdk](check)
    print("OK" if ok else "UNEXPECTED")
    sys.exit(0 if ok else 1)
