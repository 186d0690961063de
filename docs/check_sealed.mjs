// A reader outside Go: open a sealed event and a sealed KV value as
// schemas/README.md ("Sealed payloads") describes, with nothing but Node's
// own crypto (Node 20+, no npm package).
//
//   node docs/check_sealed.mjs threadkey/testdata/vector.json threadkey/testdata/vector_v2.json
//
// Each vector holds a thread key record as stored in the KV bucket
// convlog_keys, an event in its clear and its sealed encoding (format 1,
// AES-256-GCM, or format 2, XChaCha20-Poly1305), and a KV value in its
// plain and sealed form (all hex). The script prints "ok" and exits 0
// when, in every vector, both open to the clear bytes; it exits 1
// otherwise.
import { createDecipheriv, createHmac } from "node:crypto";
import { readFileSync } from "node:fs";

const hex = (s) => Buffer.from(s, "hex");
const fail = (msg) => { console.log(msg); process.exit(1); };

// HChaCha20 (draft-irtf-cfrg-xchacha section 2.2): the ChaCha20 block
// function's 20 rounds on constants || key || 16-byte input, without the
// final addition; the output is words 0-3 and 12-15. XChaCha20-Poly1305
// is ChaCha20-Poly1305 under HChaCha20(key, nonce[0:16]) with the nonce
// 00000000 || nonce[16:24]; Node has the latter, not the former.
function hchacha20(key, input) {
  const s = new Uint32Array(16);
  s.set([0x61707865, 0x3320646e, 0x79622d32, 0x6b206574]);
  for (let i = 0; i < 8; i++) s[4 + i] = key.readUInt32LE(4 * i);
  for (let i = 0; i < 4; i++) s[12 + i] = input.readUInt32LE(4 * i);
  const rotl = (x, n) => (x << n) | (x >>> (32 - n));
  const qr = (a, b, c, d) => {
    s[a] += s[b]; s[d] = rotl(s[d] ^ s[a], 16);
    s[c] += s[d]; s[b] = rotl(s[b] ^ s[c], 12);
    s[a] += s[b]; s[d] = rotl(s[d] ^ s[a], 8);
    s[c] += s[d]; s[b] = rotl(s[b] ^ s[c], 7);
  };
  for (let r = 0; r < 10; r++) {
    qr(0, 4, 8, 12); qr(1, 5, 9, 13); qr(2, 6, 10, 14); qr(3, 7, 11, 15);
    qr(0, 5, 10, 15); qr(1, 6, 11, 12); qr(2, 7, 8, 13); qr(3, 4, 9, 14);
  }
  const out = Buffer.alloc(32);
  for (let i = 0; i < 4; i++) { out.writeUInt32LE(s[i], 4 * i); out.writeUInt32LE(s[12 + i], 16 + 4 * i); }
  return out;
}

// open authenticates and decrypts ciphertext+tag (a 16-byte tag) with
// the AEAD alg ("aes-256-gcm", "chacha20-poly1305") under key k.
function open(alg, k, nonce, body, ad) {
  const ct = body.subarray(0, body.length - 16), tag = body.subarray(body.length - 16);
  const d = createDecipheriv(alg, k, nonce, { authTagLength: 16 });
  d.setAAD(ad, { plaintextLength: ct.length });
  d.setAuthTag(tag);
  try {
    return Buffer.concat([d.update(ct), d.final()]);
  } catch {
    fail("does not authenticate");
  }
}

for (const path of process.argv.slice(2)) check(JSON.parse(readFileSync(path, "utf8")));
console.log("ok");

function check(v) {

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
  if (!box.subarray(1, 9).equals(keyID)) fail("sealed with another key");
  const [id, tenant, thread, type] = [field("id"), field("tenant"), field("thread"), field("type")];
  let payload;
  if (box[0] === 1) {
    // Format 1: 01 || key id || nonce (12) || AES-256-GCM ciphertext+tag,
    // under HMAC-SHA256(key, label || id).
    const label = "convlog.event.v1\0";
    const eventKey = createHmac("sha256", key).update(label).update(id).digest();
    const ad = Buffer.from(`${label}${tenant}\0${thread}\0${id}\0${type}`, "utf8");
    payload = open("aes-256-gcm", eventKey, box.subarray(9, 21), box.subarray(21), ad);
  } else if (box[0] === 2) {
    // Format 2: 02 || key id || nonce tail (8) || ChaCha20-Poly1305
    // ciphertext+tag under HChaCha20(root, the 16 bytes of the event id),
    // root = HMAC-SHA256(key, "convlog.event.v2"), nonce 00000000 || tail:
    // XChaCha20-Poly1305 under root with the nonce id bytes || tail.
    const label = "convlog.event.v2\0";
    if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id)) fail("format 2 needs a canonical UUID event id");
    const root = createHmac("sha256", key).update("convlog.event.v2").digest();
    const eventKey = hchacha20(root, Buffer.from(id.replaceAll("-", ""), "hex"));
    const nonce = Buffer.concat([Buffer.alloc(4), box.subarray(9, 17)]);
    const ad = Buffer.from(`${label}${tenant}\0${thread}\0${id}\0${type}`, "utf8");
    payload = open("chacha20-poly1305", eventKey, nonce, box.subarray(17), ad);
  } else {
    fail(`format ${box[0]}: want 1 or 2`);
  }
  const clear = Buffer.concat([sealed.subarray(0, m.payload_sealed.start), Buffer.from([0xa7]), Buffer.from("payload"),
    payload, sealed.subarray(m.payload_sealed.end)]);
  if (!clear.equals(hex(v.event.clear))) fail("the opened event differs from the clear encoding");

  // The KV value: c1 01 || key id || nonce || ciphertext+tag, under
  // HMAC-SHA256(key, "convlog.value.v1"), associated data "convlog.value.v1\0" || place.
  const sv = hex(v.value.sealed);
  if (sv[0] !== 0xc1 || sv[1] !== 1) fail("a sealed value starts with c1 01");
  if (!sv.subarray(2, 10).equals(keyID)) fail("value sealed with another key");
  const valueKey = createHmac("sha256", key).update("convlog.value.v1").digest();
  const plain = open("aes-256-gcm", valueKey, sv.subarray(10, 22), sv.subarray(22), Buffer.from(`convlog.value.v1\0${v.value.place}`, "utf8"));
  if (!plain.equals(hex(v.value.plain))) fail("the opened value differs");
}
