// The reference encoders for writers in other languages
// (schemas/examples/check_golden.mjs and check_golden.py) reproduce every
// golden vector from its JSON form, reading the msgpack rules from the
// schemas. The JavaScript one runs here with the real @msgpack/msgpack and
// Ajv from npm; .ci/run runs the Python one with Debian's msgpack and
// jsonschema.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** js/packages/sdk-e2e/dist/test -> the package and the repository root. */
const here = dirname(fileURLToPath(import.meta.url));
const pkg = resolve(here, "../..");
const repo = resolve(pkg, "../../..");
const schemas = join(repo, "schemas");

/**
 * checkGolden runs a copy of check_golden.mjs placed in this package (so its
 * bare imports resolve to the workspace's node_modules) on schemasDir and
 * returns its exit status and output.
 */
function checkGolden(schemasDir: string): { status: number | null; out: string } {
  const dir = mkdtempSync(join(pkg, ".golden-"));
  try {
    const script = join(dir, "check_golden.mjs");
    cpSync(join(schemas, "examples", "check_golden.mjs"), script);
    const r = spawnSync(process.execPath, [script, schemasDir], { encoding: "utf8" });
    return { status: r.status, out: r.stdout + r.stderr };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("check_golden.mjs reproduces every golden vector", () => {
  const vectors = readdirSync(join(schemas, "testdata", "golden")).filter((f) => f.endsWith(".json"));
  assert.ok(vectors.length >= 17, `only ${vectors.length} golden vectors`);
  const { status, out } = checkGolden(schemas);
  assert.equal(status, 0, out);
  for (const f of vectors) assert.match(out, new RegExp(`^ok +${f.replace(/\./g, "\\.")}$`, "m"), `${f} not checked:\n${out}`);
});

test("check_golden.mjs takes the bin rule from the schema: without it a vector fails", () => {
  // A copy of the schemas whose checkpoint.writes payload no longer marks
  // "writes" as a bin holding JSON text: the encoder writes an array and
  // the bytes differ from Go's.
  const copy = mkdtempSync(join(pkg, ".schemas-"));
  try {
    cpSync(schemas, copy, { recursive: true, filter: (src) => !src.includes(`${join(schemas, "examples")}`) });
    const f = join(copy, "payloads", "checkpoint.writes.json");
    const s = JSON.parse(readFileSync(f, "utf8"));
    assert.equal(s.properties.writes["x-msgpack"], "json-bin");
    delete s.properties.writes["x-msgpack"];
    writeFileSync(f, JSON.stringify(s));
    const { status, out } = checkGolden(copy);
    assert.equal(status, 1, out);
    assert.match(out, /^FAIL checkpoint\.writes\.json$/m);
    assert.match(out, /^ok +checkpoint\.saved\.json$/m);
  } finally {
    rmSync(copy, { recursive: true, force: true });
  }
});
