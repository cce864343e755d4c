# SPDX-License-Identifier: MIT
"""Runs the moecache Python tests that need no driver (test_*.py here) and
prints one "ok N - name # description" or "not ok" line per test, then
the summary line tests/run-check reads from every unit test binary:
"Synthesis: Tested: N | Passing: N | Failing: N". Exit status 1 on any
failure. Needs PYTHONPATH to hold the built package (build/python).
An argument names another pattern of files to run instead (vm_*.py: the
tests against the driver, in the VM)."""
import os
import sys
import traceback
import unittest


def cases(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from cases(t)
        else:
            yield t


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    loader = unittest.TestLoader()
    pattern = sys.argv[1] if len(sys.argv) > 1 else "test_*.py"
    suite = loader.discover(here, pattern=pattern, top_level_dir=here)
    passed = failed = 0
    n = 0
    for case in cases(suite):
        n += 1
        result = unittest.TestResult()
        case.run(result)
        name = case.id().split(".")[-1].removeprefix("test_")
        doc = (case.shortDescription() or "").strip()
        problems = result.errors + result.failures
        if result.skipped:
            problems.append((case, f"skipped: {result.skipped[0][1]}"))
        if problems or result.unexpectedSuccesses:
            failed += 1
            print(f"not ok {n} - {name} # {doc}")
            for _, text in problems:
                print("    " + text.rstrip().replace("\n", "\n    "))
        else:
            passed += 1
            print(f"ok {n} - {name} # {doc}")
    if suite.countTestCases() == 0 or n == 0:
        print("no tests found", file=sys.stderr)
        failed += 1
    print(f"Synthesis: Tested: {passed + failed} | Passing: {passed} | Failing: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:  # a broken import of a test module is a failure too
        traceback.print_exc()
        print("Synthesis: Tested: 1 | Passing: 0 | Failing: 1")
        sys.exit(1)
