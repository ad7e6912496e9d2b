#!/usr/bin/env python3
"""Every Catch2 test name must survive CTest's discovery: catch_discover_tests splits the list it
reads at ';' (a CMake list separator), so a TEST_CASE whose name holds one is registered as
fragments that match no test: CTest runs nothing and reports a pass. Usage: check_test_names.py ROOT"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
name = re.compile(r'TEST_CASE\(\s*"((?:[^"\\]|\\.)*)"')
bad = []
for path in sorted(root.rglob("*.cpp")):
    if "build" in path.parts:
        continue
    text = path.read_text(errors="replace")
    for m in name.finditer(text):
        if ";" in m.group(1):
            line = text.count("\n", 0, m.start()) + 1
            bad.append(f"{path.relative_to(root)}:{line}: {m.group(1)}")
count = sum(len(name.findall(p.read_text(errors="replace"))) for p in root.rglob("*.cpp") if "build" not in p.parts)
print(f"{count} Catch2 test names read")
for b in bad:
    print(f"FAIL: a ';' in a test name, CTest would run nothing for it: {b}")
sys.exit(1 if bad or count == 0 else 0)
