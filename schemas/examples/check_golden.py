#!/usr/bin/env python3
"""Check a Python convlog encoder against schemas/testdata/golden.

For every golden vector: validate its JSON form against schemas/envelope.json,
encode it to msgpack the way convlog does, and compare the bytes with
msgpack_hex. encode_event() is a complete reference encoder from the JSON form.

    pip install msgpack jsonschema      # checked with msgpack 1.0.3, jsonschema 4.26
    python3 schemas/examples/check_golden.py [path/to/schemas]
"""
import calendar
import json
import pathlib
import re
import sys

import msgpack
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

# Types whose "metadata" is raw JSON (a msgpack bin holding JSON text). In
# thread.created and thread.updated (and thread.forked's "created"),
# "metadata" is a string map instead.
MESSAGE_TYPES = {"message.user", "message.assistant"}


def timestamp(s):
    """RFC 3339 (nanoseconds) -> msgpack timestamp (extension type -1)."""
    m = re.fullmatch(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)", s)
    y, mo, d, h, mi, se, frac, zone = m.groups()
    secs = calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), int(se)))
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        secs -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return msgpack.Timestamp(secs, int((frac or "").ljust(9, "0")))


def raw(value):
    """A raw JSON field: bin holding compact JSON text (what the vectors hold)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def sorted_map(m, f=lambda v: v):
    """A free-form map: keys sorted by their UTF-8 bytes."""
    return {k: f(v) for k, v in sorted(m.items(), key=lambda kv: kv[0].encode())}


def message(m):
    return {k: timestamp(v) if k == "time" else raw(v) if k == "metadata" else v for k, v in m.items()}


def payload(typ, p):
    out = {}
    for k, v in p.items():  # keys in the order the payload schema lists them
        if k == "value" or (k == "metadata" and typ in MESSAGE_TYPES):
            v = raw(v)
        elif k == "metadata":
            v = sorted_map(v)
        elif k == "state":
            v = sorted_map(v, raw)
        elif k == "messages" and v is not None:
            v = [message(m) for m in v]
        elif k == "created":
            v = {ck: sorted_map(cv) if ck == "metadata" else cv for ck, cv in v.items()}
        out[k] = v
    return out


def encode_event(ev):
    """The msgpack body of an event given in its JSON form (keys in schema order)."""
    body = {}
    for k, v in ev.items():
        if k == "time":
            v = timestamp(v)
        elif k == "payload":
            v = payload(ev["type"], v)
        body[k] = v
    return msgpack.packb(body, use_bin_type=True)


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    files = [root / "envelope.json", root / "defs.json", *sorted((root / "payloads").glob("*.json"))]
    schemas = [json.loads(p.read_text(encoding="utf-8")) for p in files]
    registry = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in schemas)
    validator = Draft202012Validator(schemas[0], registry=registry, format_checker=Draft202012Validator.FORMAT_CHECKER)
    failed = 0
    for f in sorted((root / "testdata" / "golden").glob("*.json")):
        g = json.loads(f.read_text(encoding="utf-8"))
        errors = [f"{e.json_path}: {e.message}" for e in validator.iter_errors(g["json"])]
        got = encode_event(g["json"]).hex()
        if got != g["msgpack_hex"]:
            i = next((i for i, (a, b) in enumerate(zip(got, g["msgpack_hex"])) if a != b), min(len(got), len(g["msgpack_hex"])))
            errors.append(f"msgpack differs from byte {i // 2}: got ...{got[i:i + 32]}, want ...{g['msgpack_hex'][i:i + 32]}")
        failed += bool(errors)
        print("FAIL" if errors else "ok  ", f.name)
        for e in errors:
            print("    " + e)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
