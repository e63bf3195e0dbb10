"""Calls tracefault's mock tools and turns failures into the five-field envelope.

Shared by the example agents: GET $TRACEFAULT_TOOLS_URL lists the tools with their input schemas
(the agents declare them to the model, as every provider requires before it calls a tool);
POST $TRACEFAULT_TOOLS_URL/<name> with JSON arguments; retryable failures (408, 409, 429, 5xx,
timeouts) are retried here, up to 3 attempts, honouring retry-after; anything else goes back to
the model as {code, message, retryable, details, source}.
"""

import json
import os
import time
import urllib.error
import urllib.request

TOOLS_URL = os.environ["TRACEFAULT_TOOLS_URL"]
RETRYABLE = {408, 409, 429, 500, 502, 503, 504, 529}
CODES = {429: "RATE_LIMITED", 400: "INVALID_ARGS", 422: "INVALID_ARGS", 401: "UNAUTHORIZED",
         402: "PAYMENT_REQUIRED", 403: "FORBIDDEN", 404: "NOT_FOUND", 413: "PAYLOAD_TOO_LARGE"}


def list_tools():
    """The mock tools: [{name, description, input_schema}]."""
    with urllib.request.urlopen(TOOLS_URL, timeout=30) as r:
        return json.loads(r.read().decode())["tools"]


def openai_chat_tools():
    return [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                              "parameters": t["input_schema"]}} for t in list_tools()]


def openai_responses_tools():
    return [{"type": "function", "name": t["name"], "description": t["description"],
             "parameters": t["input_schema"]} for t in list_tools()]


def anthropic_tools():
    return [{"name": t["name"], "description": t["description"], "input_schema": t["input_schema"]}
            for t in list_tools()]


def _post(name, args):
    req = urllib.request.Request(f"{TOOLS_URL}/{name}", data=json.dumps(args).encode(),
                                 headers={"content-type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode(), None
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), e.headers.get("retry-after")
    except OSError as e:  # timeouts, resets
        return 0, str(e), None


def call_tool(name, args):
    """Returns (result text, failed, envelope dict or None)."""
    for attempt in range(1, 4):
        status, body, retry_after = _post(name, args)
        if status == 200:
            try:
                json.loads(body)
                return body, False, None
            except ValueError:
                status = 0  # a damaged body: transient
        if not (status in RETRYABLE or status == 0) or attempt == 3:
            break
        time.sleep(min(float(retry_after or 0.05), 2.0))
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = f"The {name} tool failed (HTTP {status})."
    envelope = {"code": CODES.get(status, "TRANSPORT"), "message": message,
                "retryable": status in RETRYABLE or status == 0,
                "details": {"status": status, "tool": name, "attempts": attempt}, "source": "tool"}
    return json.dumps(envelope), True, envelope
