"""Judges rows under their JSON Schemas with Python's jsonschema, as a node
written in Python would: reads [{"schema": PATH, "instance": ROW}, ...] on
stdin, prints [true|false, ...] (PYTHONPATH=.tools/pyjsonschema)."""
import json
import sys

import jsonschema

cases = json.load(sys.stdin)
schemas = {}
out = []
for case in cases:
    path = case["schema"]
    if path not in schemas:
        with open(path) as f:
            schema = json.load(f)
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        schemas[path] = cls(schema)
    out.append(schemas[path].is_valid(case["instance"]))
json.dump(out, sys.stdout)
