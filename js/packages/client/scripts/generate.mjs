// Regenerates src/schema.ts (the API's types) from agentd's OpenAPI document
// when the package is built inside the convlog repository; elsewhere (a copy
// of the package, a fork without the Go server) the committed src/schema.ts
// is used as it is. Run through `npm run generate` (openapi-typescript from
// the workspace's node_modules/.bin). Commit src/schema.ts when it changes.
import { execFileSync } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..");
const openapi = join(pkg, "../../../agentd/httpapi/openapi.json");
// Builds before the schema was committed wrote an (ignored) src/schema.d.ts.
rmSync(join(pkg, "src/schema.d.ts"), { force: true });
if (existsSync(openapi)) {
  execFileSync("openapi-typescript", [relative(pkg, openapi), "--empty-objects-unknown", "-o", "src/schema.ts"], { cwd: pkg, stdio: "inherit" });
} else if (!existsSync(join(pkg, "src/schema.ts"))) {
  throw new Error(`neither ${openapi} nor src/schema.ts exists`);
} else {
  console.log("generate: no agentd/httpapi/openapi.json here; using the committed src/schema.ts");
}
