"""A reader in another process: holds one read transaction open on a callboard
database until it reads a line on stdin (or stdin closes), then lets go.

Run as ``python wal_reader.py DATABASE``; it prints ``reading N`` once its
transaction holds a snapshot of the log, and ``done`` after it has ended it.
"""

from __future__ import annotations

import sqlite3
import sys

conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN")
# The first read of a transaction takes its snapshot; it stays until COMMIT.
(count,) = conn.execute("SELECT COUNT(*) FROM actors").fetchone()
print(f"reading {count}", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
conn.close()
print("done", flush=True)
