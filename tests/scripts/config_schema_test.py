#!/usr/bin/python3
"""ctest config_schema: the JSON Schema that `trainer schema` prints, checked with Debian's
python3-jsonschema against configs that trainer itself accepts or refuses.

  1. The schema is a valid draft 2020-12 schema.
  2. Every shipped config (configs/*.yaml) validates, and its first line points editors at
     ../docs/trainer.schema.json.
  3. Each `good` case of tests/data/config_schema_cases.yaml: `trainer summary` accepts it (exit 0)
     and so does the schema.
  4. Each `bad` case: `trainer summary` refuses it as a config error (exit 3) and the schema
     refuses it too.

A case is YAML merged over the file's `base` config: mappings key by key, anything else
replaced, ~ removing the key. YAML is read as YAML 1.2 reads numbers (1e-3 is a number, as in yaml-cpp and editors).
  tests/scripts/config_schema_test.py TRAINER_BINARY
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

try:
    import jsonschema
    import yaml
except ImportError as e:
    sys.exit(f"config_schema: {e}; install python3-jsonschema and python3-yaml (scripts/setup.sh does)")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIRST_LINE = "# yaml-language-server: $schema=../docs/trainer.schema.json"


class Yaml12Loader(yaml.SafeLoader):
    """PyYAML reads YAML 1.1, where 1e-3 is a string; yaml-cpp and yaml-language-server read 1.2."""


Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$|^[-+]?\.(inf|Inf|INF)$|^\.(nan|NaN|NAN)$"),
    list("-+0123456789."))


def load(text):
    return yaml.load(text, Loader=Yaml12Loader)


def merged(base, change):
    """`change` over `base`: mappings key by key, anything else replaced; None removes the key."""
    if isinstance(base, dict) and isinstance(change, dict):
        out = dict(base)
        for k, v in change.items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = merged(base[k], v) if k in base else v
        return out
    return change


def main():
    trainer = os.path.abspath(sys.argv[1])
    schema_text = subprocess.run([trainer, "schema"], check=True, capture_output=True, text=True).stdout
    schema = json.loads(schema_text)
    validator_class = jsonschema.validators.validator_for(schema)
    if validator_class is not jsonschema.Draft202012Validator:
        sys.exit(f"config_schema: the schema's $schema is not draft 2020-12: {schema.get('$schema')}")
    validator_class.check_schema(schema)
    validator = validator_class(schema)
    failures = []

    def first_error(config):
        errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
        return errors[0] if errors else None

    configs = sorted(glob.glob(os.path.join(REPO, "configs", "*.yaml")))
    for path in configs:
        name = os.path.relpath(path, REPO)
        text = open(path).read()
        if text.split("\n", 1)[0] != FIRST_LINE:
            failures.append(f"{name}: the first line is not '{FIRST_LINE}'")
        error = first_error(load(text))
        if error:
            failures.append(f"{name}: the schema refuses it at {'.'.join(map(str, error.absolute_path))}: "
                            f"{error.message[:300]}")
        else:
            print(f"ok   schema accepts {name}")

    cases = load(open(os.path.join(REPO, "tests", "data", "config_schema_cases.yaml")).read())
    base = cases["base"]
    with tempfile.TemporaryDirectory() as work:
        for kind in ("good", "bad"):
            for case in cases[kind]:
                config = merged(base, case["yaml"])
                path = os.path.join(work, "case.yaml")
                with open(path, "w") as f:
                    yaml.safe_dump(config, f, sort_keys=False)
                run = subprocess.run([trainer, "summary", path], capture_output=True, text=True, cwd=work)
                message = (run.stderr.strip().splitlines() or ["(no message)"])[-1]
                error = first_error(config)
                expected = 0 if kind == "good" else 3
                where = f"{kind} case '{case['name']}'"
                if run.returncode != expected:
                    failures.append(f"{where}: trainer summary exits {run.returncode}, expected {expected}: {message}")
                if kind == "good" and error:
                    failures.append(f"{where}: the schema refuses it at "
                                    f"{'.'.join(map(str, error.absolute_path))}: {error.message[:300]}")
                if kind == "bad" and not error:
                    failures.append(f"{where}: the schema accepts it (trainer: {message})")
                if run.returncode == expected and (error is None) == (kind == "good"):
                    said = "accept" if kind == "good" else "refuse"
                    detail = "" if kind == "good" else f"; schema: {error.message[:120]}; trainer: {message}"
                    print(f"ok   both {said} {case['name']}{detail}")

    total = len(configs) + len(cases["good"]) + len(cases["bad"])
    if failures:
        print("\n".join("FAIL " + f for f in failures))
        sys.exit(f"config_schema: {len(failures)} failure(s) over {total} configs")
    print(f"config_schema: OK: {len(configs)} shipped configs, {len(cases['good'])} good and "
          f"{len(cases['bad'])} bad cases (jsonschema {jsonschema_version()})")


def jsonschema_version():
    try:
        from importlib.metadata import version
        return version("jsonschema")
    except Exception:
        return "?"


if __name__ == "__main__":
    main()
