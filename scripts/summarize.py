#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# summarize: adds up meson (testlog.json) and JUnit XML results (pytest, node) into one closing line.
import json
import os
import sys
import xml.etree.ElementTree as ET

passed = failed = skipped = 0
for path in sys.argv[1:]:
    try:
        if path.endswith(".json"):
            with open(path) as f:
                for line in f:
                    r = json.loads(line)
                    res = r.get("result")
                    if res in ("OK", "EXPECTEDFAIL"):
                        passed += 1
                    elif res == "SKIP":
                        skipped += 1
                    else:
                        failed += 1
                        print(f"FAILED (unit): {r.get('name')} [{path}]")
        else:
            root = ET.parse(path).getroot()
            for case in root.iter("testcase"):
                if case.find("failure") is not None or case.find("error") is not None:
                    failed += 1
                    print(f"FAILED ({os.path.basename(path)}): "
                          f"{case.get('classname')}::{case.get('name')}")
                elif case.find("skipped") is not None:
                    skipped += 1
                else:
                    passed += 1
    except (OSError, ET.ParseError, json.JSONDecodeError) as e:
        failed += 1
        print(f"FAILED: results file {path} missing or unreadable: {e}")
if passed == 0:
    failed += 1
    print("FAILED: no test ran")
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
