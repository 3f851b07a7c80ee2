"""Independent check of `lathe-engine schema` with the jsonschema package (Draft 2020-12).

The schema must be a valid JSON Schema; every preset's resolved config must validate against it;
a config with an unknown key or a bad enum value must not."""
import json
import subprocess
import sys

import jsonschema

engine = sys.argv[1]
schema = json.loads(subprocess.run([engine, "schema"], check=True, capture_output=True, text=True).stdout)
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(schema)
presets = subprocess.run([engine, "presets"], check=True, capture_output=True, text=True).stdout.split()
assert len(presets) >= 8, presets
for name in presets:
    cfg = json.loads(subprocess.run([engine, "config", name], check=True, capture_output=True, text=True).stdout)
    errors = list(validator.iter_errors(cfg))
    assert not errors, (name, [e.message for e in errors])
bad = json.loads(subprocess.run([engine, "config", "tiny"], check=True, capture_output=True, text=True).stdout)
bad["trainer"]["load_strategy"] = "sometimes"
bad["model"]["unknown"] = 1
assert len(list(validator.iter_errors(bad))) == 2
print(f"schema valid; {len(presets)} presets validate")

