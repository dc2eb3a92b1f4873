#!/usr/bin/python3
"""Where a commit's bytes go: the pages each commit in a history file's WAL wrote, by table.

Run an agent on a copy of a history file (e.g. kiwi-bench-year's year, at the default retentions)
for a few commits, stop it with kill -9 (the WAL then stays beside the file, as the last commit
left it), and give this the file: for each commit in the WAL, its frames, the distinct pages and
the distinct 4 KiB blocks of the filesystem they fall in (what a checkpoint writes when it copies
them into the database file), and which table or index each page belongs to (SQLite's dbstat, on
a copy of the file and its WAL: the original is not opened). Python 3 standard library; needs an
sqlite3 module built with dbstat (Debian's is).

Usage: tools/bench/wal_pages.py DB      (DB-wal must exist)
"""

import collections
import os
import shutil
import sqlite3
import struct
import sys
import tempfile

BLOCK = 4096


def commits_of(wal_path):
    """The page numbers of each commit in the WAL, oldest first, and the page size."""
    with open(wal_path, "rb") as f:
        data = f.read()
    if len(data) < 32:
        raise SystemExit(f"{wal_path}: no WAL header")
    _magic, _version, page_size, _seq, salt1, salt2 = struct.unpack(">IIIIII", data[:24])
    commits, current, off = [], [], 32
    while off + 24 + page_size <= len(data):
        page, db_size, s1, s2 = struct.unpack(">IIII", data[off:off + 16])
        if (s1, s2) != (salt1, salt2):
            break  # frames of an earlier generation of the WAL
        current.append(page)
        if db_size:  # a commit frame
            commits.append(current)
            current = []
        off += 24 + page_size
    return commits, page_size


def owners(db_path, pages):
    """Page number -> 'table (page type)', from dbstat on a copy of the file and its WAL."""
    work = tempfile.mkdtemp(prefix="wal-pages.")
    try:
        copy = os.path.join(work, "kiwi.db")
        shutil.copyfile(db_path, copy)
        shutil.copyfile(db_path + "-wal", copy + "-wal")
        con = sqlite3.connect(copy)
        marks = ",".join("?" * len(pages))
        rows = con.execute(f"SELECT pageno, name, pagetype FROM dbstat WHERE pageno IN ({marks})",
                           sorted(pages)).fetchall()
        con.close()
        return {p: f"{name} ({kind})" for p, name, kind in rows}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    db = sys.argv[1]
    commits, page_size = commits_of(db + "-wal")
    if not commits:
        print(f"{db}-wal: no commit in it")
        return 1
    owner = owners(db, {p for c in commits for p in c})
    per_block = BLOCK // page_size if page_size < BLOCK else 1
    print(f"page size {page_size} B; {len(commits)} commits")
    for i, pages in enumerate(commits):
        distinct = sorted(set(pages))
        blocks = {(p - 1) // per_block for p in distinct}
        kinds = collections.Counter(owner.get(p, "free list or freed") for p in distinct)
        print(f"commit {i}: {len(pages)} frames, {len(distinct)} pages in {len(blocks)} blocks of "
              f"4 KiB: " + ", ".join(f"{n} {k}" for k, n in kinds.most_common()))
    every = {p for c in commits for p in c}
    print(f"all {len(commits)} commits: {len(every)} distinct pages in "
          f"{len({(p - 1) // per_block for p in every})} blocks of 4 KiB (what one checkpoint "
          f"of them writes), {sum(len(c) for c in commits)} frames")
    return 0


if __name__ == "__main__":
    sys.exit(main())
