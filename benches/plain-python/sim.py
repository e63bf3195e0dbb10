"""The agent loop of benches/plain-python/plain-loop.toml, written plainly in Python.

This is the yardstick scripts/speed-vs-python.sh measures the engine against: the same loop a
developer would write first — one run at a time, every tool result rendered into the OpenAI Chat
tool message the model sees (json.dumps) and read back by the simulated model (json.loads), the
profile's decisions drawn from a seeded generator, backoff on a virtual clock. It follows the
README's definitions (The simulated model; [policy] defaults) for the features this scenario uses:
a sticky "more may be available" result, independent 503s, orchestrator retries (five-field) or
none (error-string), the 25-turn step cap. It draws from Python's own generator, so its figures
agree with the engine's statistically, not bit for bit; the script checks that they agree.

With --outcomes-only the model is handed each result's outcome directly instead of rendering
and reading its bytes: less work than the engine's design asks for (the model reads bytes), shown
so the comparison is also made against the fastest plain loop.

Usage: python3 sim.py RUNS SEED [--outcomes-only]
  -> one CSV line per strategy, and the total of simulated calls.
"""

import json
import random
import sys

# The scenario (benches/plain-python/plain-loop.toml).
STEPS = ["search", "fetch", "summarize"]
AMBIGUOUS_AT = {"search": {1}}  # attempt numbers on the target that answer "more may be available"
P_503 = {"fetch": 0.3, "summarize": 0.3}

# The bundled default profile and [policy] defaults (README: The simulated model, Scenario files).
P_CONTINUE = 0.93
P_RETRY_TRANSIENT = 0.8
MAX_MODEL_RETRIES = 3
P_GIVE_UP_TERMINAL = 0.9
ACCURACY = {"envelope": 0.98, "prefix": 0.90}
MODEL_LATENCY_MS = 1000
MAX_STEPS = 25
MAX_ATTEMPTS = 3
BASE_MS, CAP_MS = 500, 8000

MESSAGE_503 = (
    "The {tool} tool is temporarily unavailable (HTTP 503 Service Unavailable); "
    "the same call may succeed later."
)


def render(strategy, tool, call_id, outcome, attempts):
    """The OpenAI Chat tool message for one result, as the model receives it."""
    if outcome == "ok":
        content = json.dumps({"data": {"tool": tool, "value": 18}, "complete": True})
    elif outcome == "partial":
        if strategy == "five-field":
            content = json.dumps({"data": {"tool": tool, "value": 18}, "complete": True})
        else:
            content = json.dumps({"data": {"tool": tool, "value": 18}, "note": "More results may be available."})
    elif strategy == "five-field":
        content = json.dumps(
            {
                "code": "TRANSPORT",
                "message": MESSAGE_503.format(tool=tool),
                "retryable": True,
                "details": {"status": 503, "tool": tool, "attempts": attempts},
                "source": "tool",
            }
        )
    else:
        content = "ERROR: " + MESSAGE_503.format(tool=tool)
    return json.dumps({"role": "tool", "tool_call_id": call_id, "content": content})


def read(message):
    """What the model takes from the bytes: (failed, signal, retryable, more_available)."""
    content = json.loads(message)["content"]
    if content.startswith("{"):
        obj = json.loads(content)
        if isinstance(obj.get("code"), str) and isinstance(obj.get("retryable"), bool):
            return True, "envelope", obj["retryable"], False
        more = "note" in obj and "more" in obj["note"].lower() and not obj.get("complete", False)
        return False, None, False, more
    if content.lower().startswith("error:") or content.lower().startswith("error -"):
        return True, "prefix", None, False
    return False, None, False, False


def outcome_as_read(strategy, outcome):
    """What read(render(...)) returns, without the bytes."""
    if outcome == "transient":
        return True, "envelope" if strategy == "five-field" else "prefix", True, False
    return False, None, False, outcome == "partial" and strategy != "five-field"


def run_once(strategy, rng, outcomes_only):
    """One run; returns (ending, model_calls, tool_calls)."""
    model_calls = tool_calls = 0
    now_ms = 0
    attempts_on = {tool: 0 for tool in STEPS}
    call_ids = 0
    step = 0
    sticky_partial = False
    model_retries = 0
    while True:
        # A model turn: answer, give up or issue the step's call.
        if model_calls == MAX_STEPS:
            return "loop", model_calls, tool_calls
        model_calls += 1
        now_ms += MODEL_LATENCY_MS
        if step == len(STEPS):
            return "answer", model_calls, tool_calls
        tool = STEPS[step]
        call_ids += 1
        call_id = "call_%06d" % call_ids
        # The call's attempts: the orchestrator retries transient failures (five-field only).
        attempt_in_chain = 0
        while True:
            attempt_in_chain += 1
            tool_calls += 1
            attempts_on[tool] += 1
            if sticky_partial or attempts_on[tool] in AMBIGUOUS_AT.get(tool, ()):
                outcome = "partial"
                sticky_partial = True
            elif rng.random() < P_503.get(tool, 0.0):
                outcome = "transient"
            else:
                outcome = "ok"
            if outcome == "transient" and strategy == "five-field" and attempt_in_chain < MAX_ATTEMPTS:
                expo = min(CAP_MS, BASE_MS * 2 ** (attempt_in_chain - 1))
                now_ms += int(rng.random() * expo)  # full jitter
                continue
            break
        # The model reads the result at its next turn.
        if outcomes_only:
            failed, signal, retryable, more = outcome_as_read(strategy, outcome)
        else:
            failed, signal, retryable, more = read(render(strategy, tool, call_id, outcome, attempt_in_chain))
        if not failed:
            if more and rng.random() < P_CONTINUE:
                continue  # ask again: the same call
            step += 1
            sticky_partial = False
            model_retries = 0
            continue
        truth_transient = retryable if signal == "envelope" else True
        if rng.random() < ACCURACY[signal]:
            perceived = "transient" if truth_transient else "terminal"
        else:
            perceived = "terminal" if truth_transient else "transient"
        u = rng.random()
        if perceived == "transient":
            repeat = model_retries < MAX_MODEL_RETRIES and u < P_RETRY_TRANSIENT
        else:
            repeat = model_retries < MAX_MODEL_RETRIES and u >= P_GIVE_UP_TERMINAL
        if not repeat:
            if model_calls == MAX_STEPS:
                return "loop", model_calls, tool_calls
            return "gave_up", model_calls + 1, tool_calls
        model_retries += 1


def main():
    runs, seed = int(sys.argv[1]), int(sys.argv[2])
    outcomes_only = "--outcomes-only" in sys.argv[3:]
    total = 0
    print("strategy,runs,success_rate,loop_rate,gave_up_rate,calls_mean,model_calls_mean,tool_calls_mean")
    for strategy in ["error-string", "five-field"]:
        rng = random.Random(seed)
        endings = {"answer": 0, "loop": 0, "gave_up": 0}
        model_sum = tool_sum = 0
        for _ in range(runs):
            ending, model_calls, tool_calls = run_once(strategy, rng, outcomes_only)
            endings[ending] += 1
            model_sum += model_calls
            tool_sum += tool_calls
        total += model_sum + tool_sum
        print(
            "%s,%d,%.4f,%.4f,%.4f,%.3f,%.3f,%.3f"
            % (
                strategy,
                runs,
                endings["answer"] / runs,
                endings["loop"] / runs,
                endings["gave_up"] / runs,
                (model_sum + tool_sum) / runs,
                model_sum / runs,
                tool_sum / runs,
            )
        )
    print("calls,%d" % total)


if __name__ == "__main__":
    main()
