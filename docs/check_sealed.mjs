// A reader outside Go: open a sealed event and a sealed KV value as
// schemas/README.md ("Sealed payloads") describes, with nothing but Node's
// own crypto (Node 20+, no npm package).
//
//   node docs/check_sealed.mjs threadkey/testdata/vector.json
//
// The vector holds a thread key record as stored in the KV bucket
// convlog_keys, an event in its clear and its sealed encoding, and a KV
// value in its plain and sealed form (all hex). The script prints "ok" and
// exits 0 when both open to the clear bytes; it exits 1 otherwise.
import { createDecipheriv, createHmac } from "node:crypto";
import { readFileSync } from "node:fs";

const v = JSON.parse(readFileSync(process.argv[2], "utf8"));
const hex = (s) => Buffer.from(s, "hex");
const fail = (msg) => { console.log(msg); process.exit(1); };

// The key record: 01 || key id (8) || key (32).
const rec = hex(v.key_record);
if (rec.length !== 41 || rec[0] !== 1) fail("key record: want 41 bytes, version 1");
const keyID = rec.subarray(1, 9), key = rec.subarray(9);

// A minimal msgpack reader: enough to walk the envelope map and find the
// byte range of each member (str keys; values skipped by their headers).
function reader(b) {
  let i = 0;
  const u = (n) => { let x = 0; for (let k = 0; k < n; k++) x = x * 256 + b[i++]; return x; };
  function len(c) {
    if ((c & 0xe0) === 0xa0) return [c & 0x1f, "str"];
    switch (c) {
      case 0xd9: return [u(1), "str"]; case 0xda: return [u(2), "str"]; case 0xdb: return [u(4), "str"];
      case 0xc4: return [u(1), "bin"]; case 0xc5: return [u(2), "bin"]; case 0xc6: return [u(4), "bin"];
    }
    return [-1, ""];
  }
  function skip() {
    const c = b[i++];
    if (c <= 0x7f || c >= 0xe0 || c === 0xc0 || c === 0xc2 || c === 0xc3) return;
    if ((c & 0xf0) === 0x80) { for (let n = (c & 0x0f) * 2; n > 0; n--) skip(); return; }
    if ((c & 0xf0) === 0x90) { for (let n = c & 0x0f; n > 0; n--) skip(); return; }
    const [n] = len(c);
    if (n >= 0) { i += n; return; }
    switch (c) {
      case 0xcc: case 0xd0: i += 1; return; case 0xcd: case 0xd1: i += 2; return;
      case 0xce: case 0xd2: case 0xca: i += 4; return; case 0xcf: case 0xd3: case 0xcb: i += 8; return;
      case 0xd4: i += 2; return; case 0xd5: i += 3; return; case 0xd6: i += 5; return;
      case 0xd7: i += 9; return; case 0xd8: i += 17; return;
      case 0xc7: i += u(1) + 1; return; case 0xc8: i += u(2) + 1; return; case 0xc9: i += u(4) + 1; return;
      case 0xdc: for (let n = u(2); n > 0; n--) skip(); return;
      case 0xdd: for (let n = u(4); n > 0; n--) skip(); return;
      case 0xde: for (let n = u(2) * 2; n > 0; n--) skip(); return;
      case 0xdf: for (let n = u(4) * 2; n > 0; n--) skip(); return;
    }
    fail(`msgpack: unexpected byte 0x${c.toString(16)} at ${i - 1}`);
  }
  function members() {
    const c = b[i++];
    let n = (c & 0xf0) === 0x80 ? c & 0x0f : c === 0xde ? u(2) : c === 0xdf ? u(4) : fail("an event is a map");
    const out = {};
    for (; n > 0; n--) {
      const start = i;
      const [kl, kt] = len(b[i++]);
      if (kt !== "str") fail("envelope keys are str");
      const name = b.subarray(i, i + kl).toString("utf8");
      i += kl;
      const vstart = i;
      skip();
      out[name] = { start, vstart, end: i };
    }
    return out;
  }
  const str = (m) => { i = m.vstart; const [n] = len(b[i++]); return b.subarray(i, i + n); };
  return { members, str };
}

// The event: find payload_sealed, derive the event key, open, and put the
// payload map back in its place ("payload", a fixstr of 7 bytes).
const sealed = hex(v.event.sealed);
const r = reader(sealed);
const m = r.members();
const field = (name) => r.str(m[name]).toString("utf8");
if (!m.payload_sealed) fail("no payload_sealed member");
const box = r.str(m.payload_sealed);
if (box[0] !== 1) fail("format 1 expected");
if (!box.subarray(1, 9).equals(keyID)) fail("sealed with another key");
const [id, tenant, thread, type] = [field("id"), field("tenant"), field("thread"), field("type")];
const label = "convlog.event.v1\0";
const eventKey = createHmac("sha256", key).update(label).update(id).digest();
const ad = Buffer.from(`${label}${tenant}\0${thread}\0${id}\0${type}`, "utf8");
function open(k, boxBody, ad) {
  const nonce = boxBody.subarray(0, 12), ct = boxBody.subarray(12, boxBody.length - 16), tag = boxBody.subarray(boxBody.length - 16);
  const d = createDecipheriv("aes-256-gcm", k, nonce);
  d.setAAD(ad);
  d.setAuthTag(tag);
  try {
    return Buffer.concat([d.update(ct), d.final()]);
  } catch {
    fail("does not authenticate");
  }
}
const payload = open(eventKey, box.subarray(9), ad);
const clear = Buffer.concat([sealed.subarray(0, m.payload_sealed.start), Buffer.from([0xa7]), Buffer.from("payload"),
  payload, sealed.subarray(m.payload_sealed.end)]);
if (!clear.equals(hex(v.event.clear))) fail("the opened event differs from the clear encoding");

// The KV value: c1 01 || key id || nonce || ciphertext+tag, under
// HMAC-SHA256(key, "convlog.value.v1"), associated data "convlog.value.v1\0" || place.
const sv = hex(v.value.sealed);
if (sv[0] !== 0xc1 || sv[1] !== 1) fail("a sealed value starts with c1 01");
if (!sv.subarray(2, 10).equals(keyID)) fail("value sealed with another key");
const valueKey = createHmac("sha256", key).update("convlog.value.v1").digest();
const plain = open(valueKey, sv.subarray(10), Buffer.from(`convlog.value.v1\0${v.value.place}`, "utf8"));
if (!plain.equals(hex(v.value.plain))) fail("the opened value differs");
console.log("ok");
