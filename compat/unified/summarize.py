"""Reads the JUnit XML of a run of compat/unified/run.sh and applies the known-failures policy.

Usage: summarize.py JUNIT_XML KNOWN_FAILURES_TXT FAILURES_OUT

Prints the counts line, the new failures, the known failures that now pass and the
known failures that did not run, and writes every failing test id (with its first
error line) to FAILURES_OUT. Exit status: 0 when every failure is listed in
KNOWN_FAILURES_TXT, 1 when at least one is not (or errored in setup or teardown), 3 when
no test passed (the XML holds no test, or every test was skipped or failed: a run that
tested nothing).
With EBB_UNIFIED_STRICT=1, known failures that now pass also give exit status 1.
EBB_UNIFIED_SUBSET=1 (a run of selected tests only) leaves out the known failures that
did not run. EBB_UNIFIED_LABEL is the word the counts line starts with (default
unified_crud).
"""

from __future__ import annotations

import os
import sys
import xml.etree.ElementTree as ET
from collections import Counter

# Past this many new failures, they are shown grouped by their first error line.
LIST_AT_MOST = 30


def test_id(case: ET.Element) -> str:
    """pytest's node id for a junit testcase (classname test.test_crud_unified.TestX)."""
    classname = case.get("classname", "")
    module, _, cls = classname.rpartition(".")
    path = module.replace(".", "/") + ".py"
    return f"{path}::{cls}::{case.get('name', '')}"


def load_known(path: str) -> dict[str, str]:
    known: dict[str, str] = {}
    if not os.path.exists(path):
        return known
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            tid, _, reason = line.partition(" #")
            known[tid.strip()] = reason.strip()
    return known


def first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def main() -> int:
    junit, known_path, out_path = sys.argv[1:4]
    root = ET.parse(junit).getroot()
    known = load_known(known_path)

    passed, skipped, failed, errors = [], [], [], []
    messages: dict[str, str] = {}
    for case in root.iter("testcase"):
        tid = test_id(case)
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                # A test whose call fails *and* whose teardown errors appears with
                # both children; one failure per test is enough.
                outcome = "failed" if child.tag == "failure" else "error"
                messages.setdefault(tid, first_line(child.get("message")) or first_line(child.text))
                break
            if child.tag == "skipped":
                outcome = "skipped"
        {"passed": passed, "skipped": skipped, "failed": failed, "error": errors}[outcome].append(tid)

    failing = sorted(set(failed + errors))
    with open(out_path, "w", encoding="utf-8") as f:
        for tid in failing:
            f.write(f"{tid}  # {messages.get(tid, '')}\n")

    # An error outside the test body (the suite's setup or teardown) is never a known
    # failure: the list names tests that run and fail, and a broken setup would hide
    # behind it otherwise.
    error_set = set(errors)
    new = [t for t in failing if t not in known or t in error_set]
    now_passing = sorted(t for t in passed if t in known)
    ran = set(passed) | set(failing)
    not_run = sorted(t for t in known if t not in ran)

    if errors:
        print(f"({len(errors)} of the failures are errors outside the test body: setup or teardown)")
    if new:
        print(f"\nNEW failures, not in {os.path.relpath(known_path)} ({len(new)}):")
        for t in new[:LIST_AT_MOST]:
            print(f"  {t}\n      {messages.get(t, '')}")
        if len(new) > LIST_AT_MOST:
            print(f"  ... and {len(new) - LIST_AT_MOST} more; by first error line:")
            by_message = Counter(messages.get(t, "") for t in new)
            for message, count in by_message.most_common(LIST_AT_MOST):
                print(f"  {count:5d}  {message[:160]}")
    if now_passing:
        print(f"\nKnown failures that now PASS, remove them from the list ({len(now_passing)}):")
        for t in now_passing:
            print(f"  {t}")
    if not_run and os.environ.get("EBB_UNIFIED_SUBSET") != "1":
        print(f"\nKnown failures that did not run (skipped, deselected or renamed) ({len(not_run)}):")
        for t in not_run[:LIST_AT_MOST]:
            print(f"  {t}")
        if len(not_run) > LIST_AT_MOST:
            print(f"  ... and {len(not_run) - LIST_AT_MOST} more")
    print(f"\nfailing test ids: {out_path}")
    label = os.environ.get("EBB_UNIFIED_LABEL", "unified_crud")
    print(f"{label}: {len(passed)} passed, {len(failing)} failed, {len(skipped)} skipped")

    if not passed:
        return 3
    if new:
        return 1
    if now_passing and os.environ.get("EBB_UNIFIED_STRICT") == "1":
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
