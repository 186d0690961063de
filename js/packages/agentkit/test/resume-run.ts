// A fresh process resuming a thread: node dist/test/resume-run.js URL KEY THREAD INPUT
// prints the run's last text answer as JSON.
import { createState } from "@inngest/agent-kit";
import { makeNetwork } from "./network.js";

const [url, key, threadId, input] = process.argv.slice(2);
const { network } = makeNetwork(url, key, threadId);
const run = await network.run(input, { state: createState<Record<string, unknown>>({}, { threadId }) });
const last = run.state.results[run.state.results.length - 1];
process.stdout.write(JSON.stringify({ results: run.state.results.length, output: last?.output }));
