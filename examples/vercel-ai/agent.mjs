// An agent on the Vercel AI SDK with typed tools (JSON schemas from the mock tools), for
// `tracefault exec`:
//
//   tracefault exec SCENARIO -- node examples/vercel-ai/agent.mjs \
//       --api chat|responses|anthropic|gemini [--stream] [--max-steps N]
//
// The OpenAI and Anthropic providers read OPENAI_BASE_URL and ANTHROPIC_BASE_URL (which `exec`
// sets); the Google provider reads no base-URL variable, so it is given one from
// GOOGLE_GEMINI_BASE_URL. The loop stops after --max-steps steps (default 20).

import { generateText, jsonSchema, stepCountIs, streamText, tool } from "ai";
import { createAnthropic } from "@ai-sdk/anthropic";
import { createGoogleGenerativeAI } from "@ai-sdk/google";
import { createOpenAI } from "@ai-sdk/openai";

const argv = process.argv.slice(2);
const flag = (name) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
};
const API = flag("api") ?? "chat";
const STREAM = argv.includes("--stream");
const MAX_STEPS = Number(flag("max-steps") ?? 20);
const TOOLS_URL = process.env.TRACEFAULT_TOOLS_URL;

function model() {
  switch (API) {
    case "chat":
      return createOpenAI().chat("gpt-4o");
    case "responses":
      return createOpenAI().responses("gpt-4o");
    case "anthropic":
      return createAnthropic()("claude-sonnet-4-5");
    default:
      return createGoogleGenerativeAI({
        baseURL: `${process.env.GOOGLE_GEMINI_BASE_URL}/v1beta`,
        apiKey: process.env.GEMINI_API_KEY,
      })("gemini-2.5-flash");
  }
}

// POSTs the arguments to the mock tool and hands back what it answered, whatever the status.
async function call(name, args) {
  try {
    const r = await fetch(`${TOOLS_URL}/${name}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(args),
      signal: AbortSignal.timeout(10_000),
    });
    return await r.text();
  } catch (e) {
    return `Error: the ${name} tool did not answer: ${e.message}`;
  }
}

async function tools() {
  const listed = await (await fetch(TOOLS_URL)).json();
  return Object.fromEntries(
    listed.tools.map((t) => [
      t.name,
      tool({ description: t.description, inputSchema: jsonSchema(t.input_schema), execute: (args) => call(t.name, args) }),
    ]),
  );
}

const options = { model: model(), tools: await tools(), prompt: "Please do the task.", stopWhen: stepCountIs(MAX_STEPS) };
if (STREAM) {
  const result = streamText({ ...options, onError: ({ error }) => { throw error; } });
  console.log(await result.text);
} else {
  console.log((await generateText(options)).text);
}
