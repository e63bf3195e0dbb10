// One streamed answer read to its end with the Vercel AI SDK's defaults, for the wire tests of
// broken streams (tests/it/wire.rs): prints "RESULT ok N" (N text parts) or "RESULT <the
// error's name> <its message>", and whether the SDK asked again is counted by the caller.
//
//   tracefault exec SCENARIO -- node examples/vercel-ai/stream-check.mjs chat|responses|anthropic|gemini

import { streamText } from "ai";
import { createAnthropic } from "@ai-sdk/anthropic";
import { createGoogleGenerativeAI } from "@ai-sdk/google";
import { createOpenAI } from "@ai-sdk/openai";

const api = process.argv[2] ?? "chat";
const model = {
  chat: () => createOpenAI().chat("gpt-4o"),
  responses: () => createOpenAI().responses("gpt-4o"),
  anthropic: () => createAnthropic()("claude-sonnet-4-5"),
  gemini: () =>
    createGoogleGenerativeAI({ baseURL: `${process.env.GOOGLE_GEMINI_BASE_URL}/v1beta`, apiKey: process.env.GEMINI_API_KEY })(
      "gemini-2.5-flash",
    ),
}[api]();

let failure;
const result = streamText({ model, prompt: "hi", onError: ({ error }) => { failure ??= error; } });
let parts = 0;
try {
  for await (const _ of result.textStream) parts += 1;
} catch (e) {
  failure ??= e;
}
if (failure) {
  console.log("RESULT", failure?.name ?? typeof failure, String(failure?.message ?? failure).slice(0, 200).replace(/\n/g, " "));
} else {
  console.log("RESULT ok", parts);
}
