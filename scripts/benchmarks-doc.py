#!/usr/bin/env python3
"""Prints the measured tables of docs/results/*.md in the order docs/benchmarks.md uses,
so that the document quotes exactly what the benchmark printed. Usage:
    scripts/benchmarks-doc.py NAME   # the tables of docs/results/NAME.md, without the title line
"""
import sys
from pathlib import Path

name = sys.argv[1]
text = Path("docs/results") / f"{name}.md"
lines = text.read_text().splitlines()
print("\n".join(lines[1:]).strip())
