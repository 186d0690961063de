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

// Every schema, by its $id, so that a $ref resolves as JSON Schema says:
// against the $id of the schema it stands in.
const schemas = new Map();
function load(file) {
  const s = JSON.parse(readFileSync(join(root, file), "utf8"));
  schemas.set(s.$id, s);
  return s;
}
const envelope = load("envelope.json");
for (const f of ["defs.json", ...readdirSync(join(root, "payloads")).map((f) => "payloads/" + f)]) load(f);

// resolve returns the schema a $ref names, and the $id its own refs resolve against.
function resolve(ref, base) {
  const url = new URL(ref, base);
  const doc = schemas.get(url.href.split("#")[0]);
  let node = doc;
  for (const p of url.hash.slice(1).split("/").filter(Boolean)) node = node[decodeURIComponent(p).replace(/~1/g, "/").replace(/~0/g, "~")];
  return [node, doc.$id];
}

// shape gathers the keywords that decide the msgpack form of a value from a
// schema and the chain of $refs it follows (the nearest one wins): each as
// [keyword value, the $id it resolves against].
function shape(node, base) {
  const out = {};
  for (;;) {
    for (const k of ["x-msgpack", "format", "properties", "items", "additionalProperties"]) {
      if (!(k in out) && k in node) out[k] = [node[k], base];
    }
    if (!node.$ref) return out;
    [node, base] = resolve(node.$ref, base);
  }
}

// The rules of schemas/README.md, read from the schemas: "x-msgpack":
// "json-bin" is a bin holding the value's compact JSON text; a date-time is a
// timestamp; an object with properties keeps their order; a free-form map
// (additionalProperties only) has its keys sorted by their UTF-8 bytes.
// @msgpack/msgpack writes a JS Map as an empty map, so maps are plain objects:
// JS puts integer-like keys ("9", "10") first in numeric order, so a map with
// such keys does not match byte for byte (convlog still reads it).
const byBytes = (a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b));
function encodeValue(v, node, base) {
  const s = shape(node, base);
  if (s["x-msgpack"]?.[0] === "json-bin") return utf8.encode(JSON.stringify(v));
  if (typeof v === "string" && s.format?.[0] === "date-time") return timestamp(v);
  if (v === null || typeof v !== "object") return v;
  if (Array.isArray(v)) return s.items ? v.map((x) => encodeValue(x, ...s.items)) : v;
  if (s.properties) {
    const [props, pbase] = s.properties;
    const keys = [...Object.keys(props).filter((k) => k in v), ...Object.keys(v).filter((k) => !(k in props))];
    return Object.fromEntries(keys.map((k) => [k, k in props ? encodeValue(v[k], props[k], pbase) : v[k]]));
  }
  const [rest, rbase] = s.additionalProperties ?? [true, base];
  return Object.fromEntries(Object.keys(v).sort(byBytes).map((k) => [k, typeof rest === "object" ? encodeValue(v[k], rest, rbase) : v[k]]));
}

// The msgpack body of an event given in its JSON form: the envelope in its
// schema's order, the payload by payloads/<type>.json.
export function encodeEvent(ev) {
  const body = encodeValue({ ...ev, payload: undefined }, envelope, envelope.$id);
  body.payload = encodeValue(ev.payload, { $ref: `payloads/${ev.type}.json` }, envelope.$id);
  return encode(body);
}

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
for (const s of schemas.values()) if (s !== envelope) ajv.addSchema(s);
const validate = ajv.compile(envelope);

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
