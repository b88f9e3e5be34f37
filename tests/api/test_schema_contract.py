"""The API's published contract: nothing a client relies on disappears or is renamed unnoticed.

``schema_pinned.json`` (next to this file) records, from the OpenAPI schema drf-spectacular generates
(``SchemaGenerator().get_schema(request=None, public=True)``, what ``/api/schema/`` serves):

* every operation (``"GET /api/v1/…"``) with its query parameters, and the property names of its
  request body and of each response, nested properties as dotted paths (``results[].kind``);
* every enum's values: the components' (``AuditSnapshotKindEnum``) and the query parameters'
  (``"GET /api/v1/campaigns/{slug}/audit/snapshots/ ?kind"``, which keeps ``cheap``, the quick kind's
  former name, accepted).

The test fails when anything pinned is missing from the schema; additions pass. After an intended
addition (or a deliberate, announced break), regenerate the pin and commit it with the change::

    DJANGO_SETTINGS_MODULE=config.settings_test python -m tests.api.test_schema_contract --write
"""

import json
import sys
from pathlib import Path

PIN = Path(__file__).with_name("schema_pinned.json")
METHODS = ("get", "put", "patch", "post", "delete")
MAX_DEPTH = 6  # nested serializers deeper than this are not pinned (none are today)


def _resolve(schema: dict, components: dict, seen: frozenset) -> tuple[dict, frozenset]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        if name in seen:  # a recursive component: pinned once, at its first use
            return {}, seen
        seen |= {name}
        schema = components.get(name, {})
    return schema, seen


def _properties(schema: dict, components: dict, prefix: str = "", seen: frozenset = frozenset(), depth: int = 0):
    """The property names of ``schema`` as dotted paths; array items add ``[]``."""
    schema, seen = _resolve(schema, components, seen)
    if depth > MAX_DEPTH:
        return set()
    names = set()
    for part in schema.get("allOf", []) + schema.get("oneOf", []) + schema.get("anyOf", []):
        names |= _properties(part, components, prefix, seen, depth + 1)
    if schema.get("type") == "array" and "items" in schema:
        names |= _properties(schema["items"], components, f"{prefix}[]", seen, depth + 1)
    for name, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}.{name}" if prefix else name
        names.add(path)
        names |= _properties(sub, components, path, seen, depth + 1)
    return names


def _body(content: dict | None) -> dict | None:
    """The JSON body's schema (else the first media type's), or None without a body."""
    if not content:
        return None
    return (content.get("application/json") or next(iter(content.values()))).get("schema", {})


def contract(schema: dict) -> dict:
    """What the pin records of an OpenAPI schema (see the module docstring)."""
    components = schema.get("components", {}).get("schemas", {})
    operations, enums = {}, {}
    for name, component in components.items():
        if "enum" in component:
            enums[name] = [v for v in component["enum"] if v is not None]
    for path, item in schema["paths"].items():
        for method in METHODS:
            if method not in item:
                continue
            op, key = item[method], f"{method.upper()} {path}"
            parameters = sorted(p["name"] for p in op.get("parameters", []) if p["in"] == "query")
            for p in op.get("parameters", []):
                values = p.get("schema", {}).get("enum")
                if p["in"] == "query" and values:
                    enums[f"{key} ?{p['name']}"] = [v for v in values if v is not None]
            request = _body((op.get("requestBody") or {}).get("content"))
            operations[key] = {
                "query": parameters,
                "request": sorted(_properties(request, components)) if request is not None else [],
                "responses": {
                    status: sorted(_properties(body, components)) if (body := _body(r.get("content"))) else []
                    for status, r in sorted(op.get("responses", {}).items())
                },
            }
    return {"operations": operations, "enums": {k: sorted(v, key=str) for k, v in sorted(enums.items())}}


def current_contract() -> dict:
    from drf_spectacular.generators import SchemaGenerator

    return contract(SchemaGenerator().get_schema(request=None, public=True))


def missing(pinned: dict, now: dict) -> list[str]:
    """Everything pinned that ``now`` lacks, one line each."""
    lost = []
    for key, op in pinned["operations"].items():
        have = now["operations"].get(key)
        if have is None:
            lost.append(f"operation {key}")
            continue
        lost += [f"{key}: query parameter {p}" for p in op["query"] if p not in have["query"]]
        lost += [f"{key}: request field {f}" for f in op["request"] if f not in have["request"]]
        for status, fields in op["responses"].items():
            if status not in have["responses"]:
                lost.append(f"{key}: response {status}")
                continue
            lost += [f"{key}: response {status} field {f}" for f in fields if f not in have["responses"][status]]
    for name, values in pinned["enums"].items():
        have = now["enums"].get(name)
        if have is None:
            lost.append(f"enum {name}")
            continue
        lost += [f"enum {name}: value {v!r}" for v in values if v not in have]
    return lost


def test_nothing_pinned_disappears_or_is_renamed():
    pinned = json.loads(PIN.read_text(encoding="utf-8"))
    lost = missing(pinned, current_contract())
    assert not lost, (
        "The API lost what clients rely on (regenerate the pin only for a deliberate, announced break; "
        "see this module's docstring):\n" + "\n".join(lost)
    )


def test_the_pin_holds_the_snapshot_kinds_and_the_former_name_cheap():
    pinned = json.loads(PIN.read_text(encoding="utf-8"))
    assert pinned["enums"]["GET /api/v1/campaigns/{slug}/audit/snapshots/ ?kind"] == ["cheap", "full", "quick"]
    assert pinned["enums"]["AuditSnapshotKindEnum"] == ["full", "quick"]


def test_the_check_catches_a_rename_and_lets_additions_pass():
    pinned = {
        "operations": {"GET /a/": {"query": ["kind"], "request": [], "responses": {"200": ["id", "items[].name"]}}},
        "enums": {"KindEnum": ["quick", "full"]},
    }
    grown = {
        "operations": {
            "GET /a/": {"query": ["kind", "page"], "request": [], "responses": {"200": ["id", "items[].name", "new"]}},
            "POST /b/": {"query": [], "request": ["x"], "responses": {"201": []}},
        },
        "enums": {"KindEnum": ["quick", "full", "cheap"]},
    }
    assert missing(pinned, grown) == []
    renamed = json.loads(json.dumps(grown))
    renamed["operations"]["GET /a/"]["responses"]["200"] = ["id", "items[].title"]
    renamed["enums"]["KindEnum"] = ["fast", "full"]
    assert missing(pinned, renamed) == [
        "GET /a/: response 200 field items[].name",
        "enum KindEnum: value 'quick'",
    ]


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit(f"usage: python -m tests.api.test_schema_contract --write   (rewrites {PIN.name})")
    import django

    django.setup()
    PIN.write_text(json.dumps(current_contract(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {PIN}")
