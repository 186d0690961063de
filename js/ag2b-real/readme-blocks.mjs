// Writes each ```ts block of a README to DIR/readme-N.ts, with the
// declarations the README leaves to the reader (an AG2B `agent`, Node's
// `process`), for tsc to check against the real AG2B types.
//   node readme-blocks.mjs README.md DIR
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const [readme, dir] = process.argv.slice(2);
const blocks = [...readFileSync(readme, "utf8").matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
if (blocks.length === 0) throw new Error(`${readme}: no \`\`\`ts block`);
blocks.forEach((code, i) => {
  const prelude = [
    'import type { Agent as ReadmeAgent } from "@ag2b/core";',
    "declare const process: { env: Record<string, string | undefined> };",
    /\bconst agent\b/.test(code) ? "" : "declare const agent: ReadmeAgent;",
  ].join("\n");
  writeFileSync(join(dir, `readme-${i + 1}.ts`), `${prelude}\n${code}\nexport {};\n`);
});
console.log(`${blocks.length} TypeScript block(s) of ${readme}`);
