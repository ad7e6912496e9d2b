#!/usr/bin/env python3
"""Writes a gzipped man page from a program's own --help, so the two never disagree.
Usage: help_to_man.py PROGRAM NAME SECTION SUMMARY VERSION OUT.gz [SEE_ALSO...]"""
import gzip
import subprocess
import sys

program, name, section, summary, version, out = sys.argv[1:7]
see_also = sys.argv[7:]
r = subprocess.run([program, "--help"], capture_output=True, text=True, timeout=30)
text = (r.stdout or r.stderr).rstrip("\n")
if not text:
    sys.exit(f"help_to_man: {program} --help printed nothing")


def roff(line: str) -> str:
    line = line.replace("\\", "\\e").replace("-", "\\-")
    # A line starting with a dot or quote would be a request; \& makes it text.
    return "\\&" + line if line.startswith((".", "'")) else line


page = [f'.TH {name.upper()} {section} "" "rnic {version}" "rnic"',
        ".SH NAME", f"{name} \\- {summary}",
        ".SH DESCRIPTION",
        f"This page is {name}'s own \\fB\\-\\-help\\fR text.",
        ".PP", ".nf"]
page += [roff(l) for l in text.splitlines()]
page += [".fi"]
if see_also:
    page += [".SH SEE ALSO", ", ".join(f"\\fB{s.split('(')[0]}\\fR({s.split('(')[1]}" for s in see_also)]
    page[-1] += "\n.PP\n/usr/share/doc/rnic/"
data = ("\n".join(page) + "\n").encode()
with open(out, "wb") as f:
    # mtime 0 and no file name: the same bytes from the same help text (reproducible packages).
    with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=9) as gz:
        gz.write(data)
