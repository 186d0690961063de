#!/usr/bin/env python3
"""Check a Python convlog encoder against schemas/testdata/golden.

For every golden vector: validate its JSON form against schemas/envelope.json,
encode it to msgpack the way convlog does, and compare the bytes with
msgpack_hex. Encoder is a complete reference encoder from the JSON form that
reads the msgpack rules from the schemas, so a new event type needs no change
here.

    pip install msgpack jsonschema      # checked with msgpack 1.0.3, jsonschema 4.10 and 4.26
    # or, on Debian: apt-get install python3-msgpack python3-jsonschema
    python3 schemas/examples/check_golden.py [path/to/schemas]
"""
import calendar
import json
import pathlib
import re
import sys
from urllib.parse import unquote, urljoin

import msgpack
from jsonschema import Draft202012Validator


def timestamp(s):
    """RFC 3339 (nanoseconds) -> msgpack timestamp (extension type -1)."""
    m = re.fullmatch(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)", s)
    y, mo, d, h, mi, se, frac, zone = m.groups()
    secs = calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), int(se)))
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        secs -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return msgpack.Timestamp(secs, int((frac or "").ljust(9, "0")))


class Encoder:
    """The msgpack form of an event, read from the schemas (schemas/README.md):
    "x-msgpack": "json-bin" is a bin holding the value's compact JSON text; a
    date-time is a timestamp; an object with properties keeps their order; a
    free-form map (additionalProperties only) has its keys sorted by their
    UTF-8 bytes."""

    KEYWORDS = ("x-msgpack", "format", "properties", "items", "additionalProperties")

    def __init__(self, schemas):
        self.schemas = {s["$id"]: s for s in schemas}

    def resolve(self, ref, base):
        """The schema a $ref names, and the $id its own refs resolve against."""
        url = urljoin(base, ref)
        doc_id, _, pointer = url.partition("#")
        node = self.schemas[doc_id]
        for part in filter(None, pointer.split("/")):
            node = node[unquote(part).replace("~1", "/").replace("~0", "~")]
        return node, doc_id

    def shape(self, node, base):
        """The keywords that decide a value's form, from node and the chain of
        $refs it follows (the nearest wins), each as (value, base)."""
        out = {}
        while True:
            for k in self.KEYWORDS:
                if k not in out and k in node:
                    out[k] = (node[k], base)
            if "$ref" not in node:
                return out
            node, base = self.resolve(node["$ref"], base)

    def value(self, v, node, base):
        s = self.shape(node, base)
        if s.get("x-msgpack", (None,))[0] == "json-bin":
            return json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode()
        if isinstance(v, str) and s.get("format", (None,))[0] == "date-time":
            return timestamp(v)
        if isinstance(v, list):
            return [self.value(x, *s["items"]) for x in v] if "items" in s else v
        if not isinstance(v, dict):
            return v
        if "properties" in s:
            props, pbase = s["properties"]
            keys = [k for k in props if k in v] + [k for k in v if k not in props]
            return {k: self.value(v[k], props[k], pbase) if k in props else v[k] for k in keys}
        rest, rbase = s.get("additionalProperties", (True, base))
        return {k: self.value(x, rest, rbase) if isinstance(rest, dict) else x
                for k, x in sorted(v.items(), key=lambda kv: kv[0].encode())}

    def event(self, ev):
        """The msgpack body of an event given in its JSON form: the envelope in
        its schema's order, the payload by payloads/<type>.json."""
        env = next(s for i, s in self.schemas.items() if i.endswith("/envelope.json"))
        body = self.value({**ev, "payload": None}, env, env["$id"])
        body["payload"] = self.value(ev["payload"], {"$ref": f"payloads/{ev['type']}.json"}, env["$id"])
        return msgpack.packb(body, use_bin_type=True)


def validator_for(schemas):
    """A draft 2020-12 validator of schemas[0] that resolves $refs among the
    schemas: with `referencing` (jsonschema 4.18 and later) or the older
    RefResolver (Debian's python3-jsonschema 4.10)."""
    fc = Draft202012Validator.FORMAT_CHECKER
    try:
        from referencing import Registry, Resource
    except ImportError:
        from jsonschema import RefResolver
        resolver = RefResolver.from_schema(schemas[0], store={s["$id"]: s for s in schemas})
        return Draft202012Validator(schemas[0], resolver=resolver, format_checker=fc)
    registry = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in schemas)
    return Draft202012Validator(schemas[0], registry=registry, format_checker=fc)


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    files = [root / "envelope.json", root / "defs.json", *sorted((root / "payloads").glob("*.json"))]
    schemas = [json.loads(p.read_text(encoding="utf-8")) for p in files]
    validator = validator_for(schemas)
    encoder = Encoder(schemas)
    failed = 0
    for f in sorted((root / "testdata" / "golden").glob("*.json")):
        g = json.loads(f.read_text(encoding="utf-8"))
        errors = [f"{e.json_path}: {e.message}" for e in validator.iter_errors(g["json"])]
        got = encoder.event(g["json"]).hex()
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
