// The history file: what it holds (below), whose it is, and a damaged one. Identifies a file
// before anything is written to it, takes over versions 1-5, creates version 6, runs quick_check,
// and moves a damaged file aside (recovery). The layers above prepare their statements on the
// connection opened here.
//
// Schema (PRAGMA application_id = Store::kApplicationId, PRAGMA user_version = 6; a file of version
// 1 to 5 is taken over, its rows still read). The raw ticks are not in it: since version 6 they
// are in the tick log beside it (`<path>-ticks/`, tick_log.hpp), a block per commit as below.
//   series(id INTEGER PRIMARY KEY, name, labels, unit, kind)  -- files of version 1-4 also
//                                   -- have UNIQUE(name, labels): kept, not needed
//   blocks(ts INTEGER PRIMARY KEY   -- what agents of version 3-5 wrote, read (and pruned) as
//                                   -- long as such rows last: unix ms of the block's first tick
//          , last INTEGER           -- of its last tick (last - ts < kMaxBlockSpanMs)
//          , ticks INTEGER          -- how many ticks it holds
//          , data BLOB)             -- the ticks, each with every value (sample_codec), deflated
//   samples(ts INTEGER PRIMARY KEY, data BLOB)  -- a tick per row: what agents before version 3
//                                   -- wrote; read (and pruned) as long as such rows last
//   rollups(ts INTEGER PRIMARY KEY  -- start of a minute + group (series id / kGroupSeries), ms
//           , data BLOB)            -- per series of the group: mean, min, max, last and count of
//                                   -- that minute; group 0 also (key 0) the offset of its first
//                                   -- sample in ms, so it is there for every minute summarised;
//                                   -- deflated when that is smaller. Written by agents before
//                                   -- version 5 (this one keeps them in memory, MinuteBoard),
//                                   -- read as long as they last. A version 1-3 file's rows
//                                   -- hold every series at ts = minute: they read as group 0
//   hours(ts INTEGER PRIMARY KEY    -- start of an hour + series id
//           , data BLOB)            -- that series' minute rows of the hour (minute * 5 + k);
//                                   -- id 0: the hour's minute map (minute -> first-sample offset)
//   days(ts INTEGER PRIMARY KEY     -- start of a day (UTC) + series id
//          , data BLOB)             -- that series' hour summaries of the day (hour * 5 + k: sum,
//                                   -- min, max, last, count, folded from its hour rows; the sum
//                                   -- exact, float64 where float32 would round); id 0:
//                                   -- the day's hour map (hour -> first-sample offset)
//   output_cursors(name TEXT PRIMARY KEY  -- [[remote_write]] name
//           , acked_ms INTEGER)     -- newest sample ts the receiver acknowledged
//   (created if missing in a file of any version: older agents ignore it)
// Tiers, each pruned at its own retention ([collector] retention, minute_retention,
// hour_retention): raw ticks (the tick log; 24 h), minute summaries (hour rows; 30 days) and hour
// summaries (day rows; a year). A minute's summary is made in memory (every sample of the minute,
// also across a restart inside it: begin_minute()) and kept there, with the hour's other minutes
// (minute_board.hpp), until the hour is over; the commit after that writes the hour's rows
// (fold_hour()), and when the hour was a day's last, that day's rows from its hour rows
// (fold_day()). So a minute's summary is written once, in its hour's rows: minute rows of their
// own cost as many bytes again. What is in memory is made again from the ticks, which are on
// disk: at the first minute after a start (the hours left unfolded since the last hour rows, and
// the minutes of the hour in progress), and when the clock goes back into an hour already folded
// (its rows are written again, whole). A query reads each span of time from one tier (query.cpp,
// class Window): hour summaries for a step of whole hours, minute summaries for a step of a minute
// or more (a 24 h chart reads 1,440 minutes, not 86,400 ticks), and a coarser tier where a finer
// one has been pruned, a finer one where a coarse summary is not made yet. A query of at most
// kNarrowSeries series, or of at most a third of them, reads a folded hour's or day's map and its
// series' rows by key: a day of one series is ~24 + 24 lookups whatever the number of series;
// wider queries read the unit's rows as one range. One read transaction per query. Minute rows of
// an older agent's file, and its whole-minute rows (version 3), are read where no hour rows are.
// Flash wear sets the layout. append() keeps ticks in memory and flush() commits them every
// commit_interval (a crash loses at most that; queries see the queued ticks too) as one block,
// appended to the tick log: the ticks of a commit compress together about 3.4-fold (each repeats
// the series ids and most values of the one before). Each page an SQLite commit touches is a WAL
// frame, and a checkpoint writes it again, so what stays in this file is what changes rarely:
// new series, an hour's minute summaries once an hour, alerts, cursors (docs/benchmarks.md,
// "Disk writes").
// Whose file it is, and a damaged one. Before anything is written, the file is identified: ours
// (our application_id, or an agent before it set one: user_version 1 or 2 and only our tables),
// new (empty), or foreign, which is refused (ForeignDatabase) and left byte-identical. A file
// SQLite finds malformed (SQLITE_CORRUPT or SQLITE_NOTADB at open, at the quick_check run on
// open, or at a commit) is moved aside with its -wal and -shm as `<path>.corrupt-<UTC time>` and
// a new file started in its place: the series catalog and the queue are kept (the next commit
// writes them to the new file), only the rows in the damaged file are gone from the history.
#pragma once

#include <future>
#include <string>

#include "store/sqlite.hpp"

namespace kiwi::agent {

// A malformed file (SQLITE_CORRUPT or SQLITE_NOTADB, or a catalog that cannot be), found at open
// or at a commit: the store moves it aside and starts a new one (Store::Impl::recover()).
struct Malformed : StoreError {
  using StoreError::StoreError;
};

// The VFS every connection to the history file uses ("unix-excl"; schema.cpp says why), nullptr
// (the default) if this SQLite lacks it.
const char* history_vfs();

// Page cache per connection: 32 pages (128 KiB). SQLite's default (2 MB) let each connection's
// cache grow with the file, so RSS crept up for hours (about 50 KiB a minute under a history
// load); with 64 pages it still grew for the first minutes (15 KiB a minute while the file grew,
// docs/benchmarks.md). SQLite allocates 20 pages up front, so 32 is a plateau reached early. The
// writer touches a few pages per commit (the right edge of each table, the pruned left edge);
// queries read the rest from the kernel's page cache (a 120-sample query, about 40 pages, runs
// once per sample: later requests get the cached body).
inline constexpr const char* kCacheSizePragma = "PRAGMA cache_size=32";

// Opens `path` for the writer (read-write, created 0644 if absent), with a busy timeout. Throws
// Malformed or StoreError "<path>: cannot open: <SQLite's message>".
sql::Connection open_history(const std::string& path);

// Identifies the file `db` has open and makes it ready to write: refuses another application's
// database (ForeignDatabase) or a newer schema (StoreError) untouched; runs quick_check (Malformed
// if it finds damage); sets WAL and the pragmas; creates the tables of a new file, or adds what a
// file of version 1-5 lacks and marks it version 6. The quick_check of a file that this leaves as
// it is runs on a thread of its own instead: its verdict ("ok" or what it found) is the future
// returned (invalid when the check ran here). Throws StoreError with SQLite's message.
std::future<std::string> set_up_history(sql::Connection& db);

// Moves `path` and its -wal and -shm aside as `<path>.corrupt-<UTC time>` (a name of its own if
// that exists); `stamp` is that time. Returns the new name. Throws StoreError "<why>; cannot move
// it to ...".
std::string move_aside(const std::string& path, const std::string& why, std::string& stamp);

}  // namespace kiwi::agent
