"""The scenario's tools for the framework agents: their list and input schemas from
GET $TRACEFAULT_TOOLS_URL, and a call that POSTs the arguments and hands back what the tool
answered (its body, whatever the status), as a tool written the plain way does.
"""

import json
import os
import urllib.error
import urllib.request

TOOLS_URL = os.environ["TRACEFAULT_TOOLS_URL"]
PROMPT = "Please do the task."


def tools():
    """[(name, description, input JSON schema)] of the scenario's mock tools."""
    with urllib.request.urlopen(TOOLS_URL, timeout=30) as r:
        return [(t["name"], t["description"], t["input_schema"]) for t in json.load(r)["tools"]]


def call(name, args):
    """POSTs `args` to the tool; returns the body it answered, or what went wrong."""
    req = urllib.request.Request(f"{TOOLS_URL}/{name}", data=json.dumps(args).encode(),
                                 headers={"content-type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.read().decode()
    except urllib.error.HTTPError as e:
        return e.read().decode()
    except OSError as e:  # a timeout, a dropped connection
        return f"Error: the {name} tool did not answer: {e}"


def flag(name):
    """The value after `--name`, if given."""
    import sys
    return sys.argv[sys.argv.index(f"--{name}") + 1] if f"--{name}" in sys.argv else None
