"""Runs schemathesis over docs/openapi.yaml (scripts/fuzz), then prints what it sent and what came back.

Usage: fuzz.py SPEC BASE_URL HAR_FILE -- SCHEMATHESIS_ARGS...

The statistics come from the HAR file schemathesis writes: requests per operation (the spec's paths and
methods), and a histogram of statuses. The run fails when schemathesis fails, and when 1 % or more of
the answers are 429 (the server's rate limits would then hide what the fuzzer means to reach).
"""
import collections
import json
import re
import sys

# hypothesis describes the filters it builds by parsing their source with `ast`; on CPython 3.11 that
# can fail with "AST constructor recursion depth mismatch" (python/cpython#106905), which schemathesis
# reports as an error of the operation under test. The description is only used in messages.
import hypothesis.internal.lambda_sources as lambda_sources  # noqa: E402

_describe = lambda_sources.lambda_description


def _lambda_description(function):
    try:
        return _describe(function)
    except SystemError:
        return "lambda"


lambda_sources.lambda_description = _lambda_description

import yaml  # noqa: E402
from schemathesis.cli import schemathesis as cli  # noqa: E402


def operations(spec_path):
    """(method, compiled path pattern, label) of every operation of the spec."""
    with open(spec_path, encoding="utf-8") as handle:
        spec = yaml.safe_load(handle)
    found = []
    for path, item in spec["paths"].items():
        pattern = re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$")
        for method in item:
            if method in ("get", "put", "post", "patch", "delete", "head", "options", "trace"):
                found.append((method.upper(), pattern, f"{method.upper()} {path}"))
    return found


def statistics(spec_path, base_url, har_path):
    known = operations(spec_path)
    per_operation = collections.defaultdict(collections.Counter)
    statuses = collections.Counter()
    with open(har_path, encoding="utf-8") as handle:
        entries = json.load(handle)["log"]["entries"]
    for entry in entries:
        method = entry["request"]["method"]
        path = entry["request"]["url"][len(base_url):].split("?", 1)[0] or "/"
        status = entry["response"]["status"]
        label = next((name for verb, pattern, name in known if verb == method and pattern.match(path)), None)
        if label is None:
            label = f"{method} (a path or method the spec does not have)"
        per_operation[label][status] += 1
        statuses[status] += 1
    return per_operation, statuses


def main():
    spec_path, base_url, har_path = sys.argv[1:4]
    arguments = sys.argv[5:]
    try:
        cli.main(args=arguments, prog_name="schemathesis", standalone_mode=True)
        code = 0
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else 1
    per_operation, statuses = statistics(spec_path, base_url, har_path)
    total = sum(statuses.values())
    print(f"\nfuzz: {total} requests")
    for label in sorted(per_operation):
        counts = per_operation[label]
        shown = ", ".join(f"{status}: {count}" for status, count in sorted(counts.items()))
        print(f"  {label}: {sum(counts.values())} ({shown})")
    print("fuzz: statuses: " + ", ".join(f"{status}: {count}" for status, count in sorted(statuses.items())))
    limited = statuses.get(429, 0)
    share = limited / total if total else 0
    print(f"fuzz: 429 answers: {limited} ({share:.2%})")
    server_errors = sum(count for status, count in statuses.items() if status >= 500)
    print(f"fuzz: 5xx answers: {server_errors}")
    if share >= 0.01:
        print("fuzz: 1 % or more of the answers are 429: raise the limits of the server under test")
        code = code or 1
    sys.exit(code)


if __name__ == "__main__":
    main()
