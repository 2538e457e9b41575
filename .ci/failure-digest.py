#!/usr/bin/env python3
"""Prints, for each failed test of the given ctest build folders, the end of its output.

CI shows the end of its log; ctest prints a failed test's output where the test ran, often
thousands of lines above its summary. .ci/run calls this when it fails, so that the cause
(not only the name) of every failure is at the end of the log, and a closing
`N passed, N failed` over the folders given (those ctest ran in).

  failure-digest.py [--lines N] BUILD_DIR...
"""
import argparse
import os
import re
import sys


def failed_tests(build_dir):
    temporary = os.path.join(build_dir, "Testing", "Temporary")
    path = os.path.join(temporary, "LastTestsFailed.log")
    if not os.path.exists(path):
        return []
    # ctest leaves the list of an earlier failed run when a later run passes.
    last = os.path.join(temporary, "LastTest.log")
    if os.path.exists(last) and os.path.getmtime(path) < os.path.getmtime(last) - 60:
        return []
    with open(path, errors="replace") as f:
        # "NNN:name" per line.
        return [line.split(":", 1)[1].strip() for line in f if ":" in line]


def passed_count(build_dir):
    path = os.path.join(build_dir, "Testing", "Temporary", "LastTest.log")
    if not os.path.exists(path):
        return 0
    with open(path, errors="replace") as f:
        return sum(1 for line in f if line.startswith("Test Passed."))


def outputs(build_dir):
    """name -> output, from ctest's LastTest.log."""
    path = os.path.join(build_dir, "Testing", "Temporary", "LastTest.log")
    if not os.path.exists(path):
        return {}
    with open(path, errors="replace") as f:
        text = f.read()
    found = {}
    pattern = re.compile(r"^\d+/\d+ Test: (.+?)\n.*?^Output:\n-+\n(.*?)^<end of output>",
                         re.M | re.S)
    for match in pattern.finditer(text):
        found[match.group(1).strip()] = match.group(2)
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=40)
    parser.add_argument("build_dirs", nargs="+")
    args = parser.parse_args()
    total_passed = total_failed = 0
    for build_dir in args.build_dirs:
        failed = failed_tests(build_dir)
        total_passed += passed_count(build_dir)
        total_failed += len(failed)
        if not failed:
            continue
        out = outputs(build_dir)
        print(f"==== {build_dir}: {len(failed)} failed test(s), the end of each one's output")
        for name in failed:
            lines = out.get(name)
            print(f"---- {name}")
            if lines is None:
                print("(no output recorded: not run, or ctest stopped first)")
                continue
            print("\n".join(lines.rstrip("\n").splitlines()[-args.lines:]))
    print(f"{total_passed} passed, {total_failed} failed  ({', '.join(args.build_dirs)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
