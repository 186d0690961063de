// An auditor outside Go: recompute convlog's leaf hashes and hash chains
// (docs/audit.md) and check a signed checkpoint, with nothing but Node's own
// crypto (Node 20+, no npm package).
//
//   node docs/check_audit.mjs audit/testdata/vector.json
//
// The vector holds stored messages as JetStream returned them (subject,
// sequence, store time in Unix nanoseconds as a decimal string: beyond a
// JavaScript number's 53 bits, header, body in base64), the
// checkpoint body and signature, and the public key. The script prints "ok"
// and exits 0 when every leaf, every chain head and the signature agree.
import { createHash, createPublicKey, verify } from "node:crypto";
import { readFileSync } from "node:fs";

const v = JSON.parse(readFileSync(process.argv[2], "utf8"));
const enc = new TextEncoder();
const u32 = (n) => { const b = Buffer.alloc(4); b.writeUInt32BE(n); return b; };
const u64 = (n) => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt.asUintN(64, BigInt(n))); return b; };
const lp = (bytes) => Buffer.concat([u32(bytes.length), Buffer.from(bytes)]);

function leaf(r) {
  const fields = [];
  for (const name of Object.keys(r.header).sort((a, b) => {
    const la = a.toLowerCase(), lb = b.toLowerCase();
    return la < lb ? -1 : la > lb ? 1 : a < b ? -1 : a > b ? 1 : 0;
  })) {
    const n = name.toLowerCase();
    if (n.startsWith("nats-") && n !== "nats-msg-id") continue;
    for (const value of r.header[name]) fields.push([n, value]);
  }
  const h = createHash("sha256");
  h.update("convlog.audit.leaf.v1\n");
  h.update(u64(r.seq));
  h.update(u64(r.time_unix_nano));
  h.update(lp(enc.encode(r.subject)));
  h.update(u32(fields.length));
  for (const [n, value] of fields) { h.update(lp(enc.encode(n))); h.update(lp(enc.encode(value))); }
  h.update(lp(Buffer.from(r.data_base64, "base64")));
  return h.digest();
}

const next = (prev, l) => createHash("sha256").update("convlog.audit.chain.v1\n").update(prev).update(l).digest();

let failed = 0;
const fail = (msg) => { failed++; console.error(msg); };
const heads = {};
for (const r of v.records) {
  const l = leaf(r);
  if (l.toString("hex") !== r.leaf) fail(`seq ${r.seq}: leaf ${l.toString("hex")}, the vector says ${r.leaf}`);
  heads[r.subject] = next(heads[r.subject] ?? Buffer.alloc(32), l);
}

// The checkpoint: signature over the body bytes, then each thread's heads.
const body = Buffer.from(v.checkpoint.body_base64, "base64");
const key = createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: Buffer.from(v.public_key, "base64").toString("base64url") }, format: "jwk" });
if (!verify(null, body, key, Buffer.from(v.checkpoint.signature, "base64"))) fail("the checkpoint signature does not verify");
const cp = JSON.parse(body.toString("utf8"));
for (const th of cp.threads) {
  let h = th.prev ? Buffer.from(th.prev, "hex") : Buffer.alloc(32);
  for (const [seq, l] of th.leaves) {
    const r = v.records.find((x) => x.seq === seq);
    if (!r || r.leaf !== l) fail(`${th.subject} seq ${seq}: the checkpoint's leaf is not the stored message's`);
    h = next(h, Buffer.from(l, "hex"));
  }
  if (h.toString("hex") !== th.head) fail(`${th.subject}: head ${h.toString("hex")}, the checkpoint says ${th.head}`);
  if ((heads[th.subject]?.toString("hex") ?? "") !== th.head) fail(`${th.subject}: the chain of the stored messages ends at another head`);
}
if (failed) process.exit(1);
console.log("ok");
