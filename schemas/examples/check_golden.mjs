// Check a TypeScript/JavaScript convlog encoder against schemas/testdata/golden.
//
// For every golden vector: validate its JSON form against schemas/envelope.json
// (Ajv, draft 2020-12), encode it to msgpack the way convlog does, and compare
// the bytes with msgpack_hex. encodeEvent() is a complete reference encoder
// from the JSON form.
//
//   npm install @msgpack/msgpack ajv ajv-formats   # checked with 3.1.3, 8.x, 3.x
//   node schemas/examples/check_golden.mjs [path/to/schemas]
import { encode, ExtData, encodeTimeSpecToTimestamp } from "@msgpack/msgpack";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = process.argv[2] ?? join(dirname(fileURLToPath(import.meta.url)), "..");
const utf8 = new TextEncoder();

// RFC 3339 (nanoseconds) -> msgpack timestamp (extension type -1). A JS Date
// would lose the nanoseconds.
function timestamp(s) {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$/.exec(s);
  const sec = Math.floor(Date.parse(m[1] + m[3]) / 1000);
  const nsec = Number((m[2] ?? "").padEnd(9, "0"));
  return new ExtData(-1, encodeTimeSpecToTimestamp({ sec, nsec }));
}

// A raw JSON field: bin (Uint8Array) holding compact JSON text.
const raw = (v) => utf8.encode(JSON.stringify(v));

// A free-form map, keys sorted by their UTF-8 bytes. @msgpack/msgpack writes
// a JS Map as an empty map, so this must be a plain object; JS puts
// integer-like keys ("9", "10") first in numeric order, so a map with such
// keys does not match byte for byte (convlog still reads it).
const byBytes = (a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b));
const sortedMap = (o, f = (v) => v) =>
  Object.fromEntries(Object.keys(o).sort(byBytes).map((k) => [k, f(o[k])]));

const message = (m) =>
  Object.fromEntries(Object.entries(m).map(([k, v]) => [k, k === "time" ? timestamp(v) : k === "metadata" ? raw(v) : v]));

function payload(type, p) {
  const out = {}; // keys in the order the payload schema lists them
  for (const [k, v] of Object.entries(p)) {
    if (k === "value" || (k === "metadata" && type.startsWith("message."))) out[k] = raw(v);
    else if (k === "metadata") out[k] = sortedMap(v); // thread.created / thread.updated: string map
    else if (k === "state") out[k] = sortedMap(v, raw);
    else if (k === "messages" && v !== null) out[k] = v.map(message);
    else if (k === "created") out[k] = Object.fromEntries(Object.entries(v).map(([ck, cv]) => [ck, ck === "metadata" ? sortedMap(cv) : cv]));
    else out[k] = v;
  }
  return out;
}

// The msgpack body of an event given in its JSON form (keys in schema order).
export const encodeEvent = (ev) =>
  encode(Object.fromEntries(Object.entries(ev).map(([k, v]) => [k, k === "time" ? timestamp(v) : k === "payload" ? payload(ev.type, v) : v])));

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
for (const f of ["defs.json", ...readdirSync(join(root, "payloads")).map((f) => "payloads/" + f)]) {
  ajv.addSchema(JSON.parse(readFileSync(join(root, f), "utf8")));
}
const validate = ajv.compile(JSON.parse(readFileSync(join(root, "envelope.json"), "utf8")));

let failed = 0;
for (const f of readdirSync(join(root, "testdata", "golden")).sort()) {
  const g = JSON.parse(readFileSync(join(root, "testdata", "golden", f), "utf8"));
  const errors = validate(g.json) ? [] : validate.errors.map((e) => `${e.instancePath}: ${e.message}`);
  const got = Buffer.from(encodeEvent(g.json)).toString("hex");
  if (got !== g.msgpack_hex) {
    let i = 0;
    while (got[i] === g.msgpack_hex[i]) i++;
    errors.push(`msgpack differs from byte ${i >> 1}: got ...${got.slice(i, i + 32)}, want ...${g.msgpack_hex.slice(i, i + 32)}`);
  }
  if (errors.length) failed++;
  console.log(errors.length ? "FAIL" : "ok  ", f);
  for (const e of errors) console.log("    " + e);
}
process.exit(failed ? 1 : 0);
