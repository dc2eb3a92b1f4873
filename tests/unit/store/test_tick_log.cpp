// The tick log (store/tick_log.hpp): raw ticks appended to a file an hour beside the history
// file; torn and damaged records; the clock going back; a new history file.
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>

#include "store/sample_codec.hpp"
#include "store/tick_log.hpp"
#include "store_test_support.hpp"

using namespace kiwi::agent;
using namespace store_test;

namespace {

std::vector<std::int64_t> ts_read(const TickLog& log, bool newest_first = false) {
  std::vector<std::int64_t> out;
  log.blocks(INT64_MIN, INT64_MAX, newest_first, [&](const TickLog::Block& b) {
    out.push_back(b.ts);
    return true;
  });
  return out;
}

void add_bytes(const std::string& path, const std::string& bytes, long at = -1) {
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  REQUIRE(f);
  if (at < 0)
    std::fseek(f, 0, SEEK_END);
  else
    std::fseek(f, at, SEEK_SET);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

}  // namespace

TEST_CASE("tick log: blocks go to their hour's file and read back in order") {
  TempDb db;
  TickLog log(db.path() + "-ticks");
  log.append(1'000, 9'000, 9, "first");
  log.append(10'000, 19'000, 10, "second");
  log.append(3'600'000, 3'609'000, 10, "third");
  CHECK(log_hours(db.path()) == std::vector<std::int64_t>{0, 3'600'000});
  CHECK(ts_read(log) == std::vector<std::int64_t>{1'000, 10'000, 3'600'000});
  CHECK(ts_read(log, true) == std::vector<std::int64_t>{3'600'000, 10'000, 1'000});
  CHECK(log.oldest() == 1'000);
  std::string data;
  log.blocks(15'000, 15'000, false, [&](const TickLog::Block& b) {
    data = std::string(b.data) + "/" + std::to_string(b.ticks);
    return true;
  });
  CHECK(data == "second/10");  // the only block that holds 15 s
  CHECK(kiwi_test::ticks_in_log(db.path()) == 29);
}

TEST_CASE("tick log: a torn last record is skipped, and written over by the next append") {
  TempDb db;
  const std::string file = db.path() + "-ticks/0.ticks";
  {
    TickLog log(db.path() + "-ticks");
    log.append(1'000, 2'000, 2, "one");
    log.append(3'000, 4'000, 2, "two");
  }
  const auto whole = fs::file_size(file);
  SECTION("cut inside the block") {
    fs::resize_file(file, whole - 2);
  }
  SECTION("cut inside the header") {
    fs::resize_file(file, whole - 3 - 20);
  }
  SECTION("cut at the end of the record before") {
    fs::resize_file(file, 32 + 3);
  }
  SECTION("all written but the block's bytes (a power cut)") {
    add_bytes(file, "XYZ", static_cast<long>(whole) - 3);
  }
  TickLog log(db.path() + "-ticks");
  CHECK(ts_read(log) == std::vector<std::int64_t>{1'000});
  log.append(5'000, 6'000, 2, "three");  // the torn record goes first
  CHECK(ts_read(log) == std::vector<std::int64_t>{1'000, 5'000});
  CHECK(kiwi_test::ticks_in_log(db.path()) == 4);
  CHECK(log.take_note().empty());  // a torn append is not damage
}

TEST_CASE("tick log: a damaged record reads as missing, a file that no longer frames goes aside") {
  TempDb db;
  const std::string file = db.path() + "-ticks/0.ticks";
  {
    TickLog log(db.path() + "-ticks");
    log.append(1'000, 2'000, 2, "one");
    log.append(3'000, 4'000, 2, "two");
    log.append(5'000, 6'000, 2, "six");
  }
  SECTION("a byte of the middle block flipped: its CRC fails") {
    add_bytes(file, "X", 4096 + 32 + 1);  // records start at multiples of 4 KiB
    TickLog log(db.path() + "-ticks");
    CHECK(ts_read(log) == std::vector<std::int64_t>{1'000, 5'000});
    log.append(7'000, 8'000, 2, "more");
    CHECK(ts_read(log) == std::vector<std::int64_t>{1'000, 5'000, 7'000});
    CHECK(log.take_note().empty());
  }
  SECTION("junk where the first record was, nothing of the hour after it: damage too") {
    std::FILE* f = std::fopen(file.c_str(), "wb");
    REQUIRE(f);
    for (int i = 0; i < 8; ++i) std::fputs("garbage!", f);  // more than a header: not torn
    std::fclose(f);
    TickLog log(db.path() + "-ticks");
    CHECK(ts_read(log).empty());
    log.append(7'000, 8'000, 2, "more");
    CHECK_THAT(log.take_note(), Catch::Contains(file + ": damaged at byte 0"));
    CHECK(ts_read(log) == std::vector<std::int64_t>{7'000});
  }
  SECTION("the middle record's header overwritten: the rest cannot be framed") {
    add_bytes(file, "garbage!", 4096);
    TickLog log(db.path() + "-ticks");
    CHECK(ts_read(log) == std::vector<std::int64_t>{1'000});
    log.append(7'000, 8'000, 2, "more");
    const std::string note = log.take_note();
    CHECK_THAT(note, Catch::Contains(file + ": damaged at byte 4096") &&
                         Catch::Contains(file + ".corrupt-"));
    CHECK(ts_read(log) == std::vector<std::int64_t>{7'000});  // the hour's file anew
    int aside = 0;
    for (auto& e : fs::directory_iterator(db.path() + "-ticks"))
      aside += e.path().filename().string().starts_with("0.ticks.corrupt-");
    CHECK(aside == 1);
  }
}

TEST_CASE("tick log: the clock gone back appends to an earlier hour, each ts read once") {
  TempDb db;
  TickLog log(db.path() + "-ticks");
  log.append(3'600'000, 3'605'000, 6, "a");
  log.append(3'610'000, 3'615'000, 6, "b");
  log.append(7'200'000, 7'205'000, 6, "c");
  log.append(3'600'000, 3'602'000, 3, "again");  // back into hour 1, the same first tick
  log.append(1'000, 2'000, 2, "early");
  std::vector<std::string> seen;
  log.blocks(INT64_MIN, INT64_MAX, false, [&](const TickLog::Block& b) {
    seen.emplace_back(b.data);
    return true;
  });
  CHECK(seen == std::vector<std::string>{"early", "again", "b", "c"});  // the later-written wins
}

TEST_CASE("tick log: through the store: damage is reported, a new history file drops old ticks") {
  TempDb db;
  {
    Store store(db.path());
    for (int i = 0; i < 20; ++i) append(store, i * 1000, {metric("a", i, "")}, i % 5 == 4);
  }
  SECTION("a file that no longer frames is reported as a recovery") {
    add_bytes(db.path() + "-ticks/0.ticks", "garbage!", 0);
    Store store(db.path());
    append(store, 30'000, {metric("a", 1, "")});
    CHECK(store.recoveries() == 1);
    CHECK_THAT(store.recovery_note(), Catch::Contains("0.ticks: damaged at byte 0"));
    CHECK(store.query({}).timestamps == std::vector<double>{30});
  }
  SECTION("the history file deleted: its ticks name ids of its catalog, so they go too") {
    fs::remove(db.path());
    fs::remove(db.path() + "-wal");
    Store store(db.path());
    CHECK(kiwi_test::ticks_in_log(db.path()) == 0);
    CHECK(store.query({}).timestamps.empty());
    append(store, 30'000, {metric("b", 1, "")});
    CHECK(store.query({}).timestamps == std::vector<double>{30});
  }
  SECTION("reopened as it was: every tick is there") {
    Store store(db.path());
    kiwi::HistoryQuery q;
    q.limit = 100;
    CHECK(store.query(q).timestamps.size() == 20);
  }
}

namespace {

constexpr std::int64_t kHour = 3'600'000;

// The first tick (ts) of the record header at `at` of `path`.
std::int64_t first_ts_at(const std::string& path, long at) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE(f);
  unsigned char h[16] = {};
  std::fseek(f, at, SEEK_SET);
  const auto got = std::fread(h, 1, sizeof h, f);
  std::fclose(f);
  REQUIRE(got == sizeof h);
  std::uint64_t ts = 0;
  for (int i = 0; i < 8; ++i) ts |= std::uint64_t(h[8 + i]) << (8 * i);
  return static_cast<std::int64_t>(ts);
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  for (auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("tick log: pruned files are kept as spares and recycled for hours to come") {
  TempDb db;
  const std::string dir = db.path() + "-ticks";
  TickLog log(dir);
  // Hours 0-3, each with blocks of two pages, so a recycled file is longer than one new record.
  for (std::int64_t h = 0; h < 4; ++h)
    for (int i = 0; i < 3; ++i)
      log.append(h * kHour + i * 1000, h * kHour + i * 1000 + 500, 1, std::string(5000, 'a' + h));
  const auto inode_of = [&](const std::string& name) {
    struct stat st {};
    REQUIRE(::stat((dir + "/" + name).c_str(), &st) == 0);
    return st.st_ino;
  };
  const auto hour0 = inode_of("0.ticks");
  // Hours 0-2 go (hour 3 is read from the cut on): two kept as spares, the third deleted.
  CHECK(log.prune(3 * kHour + kMaxBlockSpanMs) == 3);
  CHECK(names_in(dir) == std::vector<std::string>{"0.spare", "10800.ticks", "3600.spare"});
  CHECK(log_hours(db.path()) == std::vector<std::int64_t>{3 * kHour});

  // Hour 4's file is the oldest spare renamed: its blocks are already the file's, the append
  // overwrites from its start, and none of what it held before is read.
  log.append(4 * kHour, 4 * kHour + 500, 1, "new");
  CHECK(names_in(dir) == std::vector<std::string>{"10800.ticks", "14400.ticks", "3600.spare"});
  CHECK(inode_of("14400.ticks") == hour0);
  CHECK(fs::file_size(dir + "/14400.ticks") == 2 * 8192 + 32 + 5000);  // not cut, not grown
  CHECK(ts_read(log) == std::vector<std::int64_t>{4 * kHour});
  CHECK(log.oldest() == 4 * kHour);
  log.append(4 * kHour + 1000, 4 * kHour + 1500, 1, "next");
  {
    TickLog again(dir);  // a restart: the records of the hour, not what follows them
    CHECK(ts_read(again) == std::vector<std::int64_t>{3 * kHour, 3 * kHour + 1000, 3 * kHour + 2000,
                                                      4 * kHour, 4 * kHour + 1000});
    CHECK(again.oldest() == 3 * kHour);  // the cut is the writer's: a new log has none yet
    again.append(4 * kHour + 2000, 4 * kHour + 2500, 1, "after a restart");
    std::vector<std::string> seen;
    again.blocks(4 * kHour, INT64_MAX, false, [&](const TickLog::Block& b) {
      seen.emplace_back(b.data);
      return true;
    });
    CHECK(seen == std::vector<std::string>{"new", "next", "after a restart"});
    CHECK(again.take_note().empty());  // what a recycled file held before is not damage
  }
  CHECK(kiwi_test::ticks_in_log(db.path()) == 6);  // the test's own reader: hours 3 and 4 only

  SECTION("an append torn in a recycled file is overwritten by the next one") {
    TickLog writer(dir);
    writer.append(4 * kHour + 3000, 4 * kHour + 3500, 1, std::string(100, 'z'));
    add_bytes(dir + "/14400.ticks", "XYZ", 3 * 4096 + 32 + 50);  // its block, not all written
    TickLog again(dir);
    CHECK(ts_read(again).back() == 4 * kHour + 2000);
    again.append(4 * kHour + 4000, 4 * kHour + 4500, 1, "whole");
    CHECK(ts_read(again).back() == 4 * kHour + 4000);
    CHECK(first_ts_at(dir + "/14400.ticks", 3 * 4096) == 4 * kHour + 4000);  // over the torn one
    CHECK(again.take_note().empty());
  }
  SECTION("a damaged size that hides the records after it is damage, not a torn append") {
    add_bytes(dir + "/14400.ticks", std::string("\x28\x23\x00\x00", 4), 4096 + 4);  // 9000
    TickLog again(dir);
    again.append(4 * kHour + 3000, 4 * kHour + 3500, 1, "more");
    CHECK_THAT(again.take_note(), Catch::Contains("14400.ticks: damaged at byte 4096"));
  }
  SECTION("a restart between a spare's rename and the first append: the hour reads empty") {
    fs::rename(dir + "/3600.spare", dir + "/18000.ticks");  // hour 5's file, nothing appended
    TickLog again(dir);
    CHECK(ts_read(again).back() == 4 * kHour + 2000);
    again.append(5 * kHour, 5 * kHour + 500, 1, "five");
    CHECK(ts_read(again).back() == 5 * kHour);
    CHECK(first_ts_at(dir + "/18000.ticks", 0) == 5 * kHour);
    CHECK(again.take_note().empty());
  }
  SECTION("a damaged header with a record of the hour after it is damage, not the end") {
    add_bytes(dir + "/14400.ticks", "garbage!", 4096);  // the second of three records
    TickLog again(dir);
    CHECK(ts_read(again).back() == 4 * kHour);  // what follows the damage is not read
    again.append(4 * kHour + 3000, 4 * kHour + 3500, 1, "more");
    CHECK_THAT(again.take_note(), Catch::Contains("14400.ticks: damaged at byte 4096"));
  }
  SECTION("the clock gone back: no spare of a later hour is taken, so nothing of the hour in it") {
    // A spare last of hour 7 that still holds records of hour 5 from a life before (the clock
    // went back since): taken for hour 5, its record at 12 KiB would read as the hour's.
    {
      TickLog other(db.path() + "-other");
      other.append(5 * kHour, 5 * kHour + 500, 1, std::string(9000, 'o'));  // 3 pages
      other.append(5 * kHour + 1000, 5 * kHour + 1500, 1, "old");           // at 12 KiB
    }
    fs::rename(db.path() + "-other/18000.ticks", dir + "/25200.spare");
    fs::remove(dir + "/3600.spare");
    log.append(5 * kHour + 2000, 5 * kHour + 2500, 1, "five");
    CHECK(fs::exists(dir + "/25200.spare"));               // not taken
    CHECK(fs::file_size(dir + "/18000.ticks") == 32 + 4);  // a new file
    CHECK(ts_read(log).back() == 5 * kHour + 2000);
    CHECK(log.take_note().empty());
  }
  SECTION("a new history file deletes the spares too") {
    log.clear();
    CHECK(names_in(dir).empty());
  }
}

TEST_CASE(
    "tick log: a record carries catalog rows beside its block and the largest carry is found") {
  TempDb db;
  TickLog log(db.path() + "-ticks");
  CHECK(log.carried().empty());  // no log
  auto carry = [](std::uint64_t rank, const std::string& rows) {
    std::string out;
    sample_codec::put_varint(out, rank);
    return out + rows;
  };
  log.append(1'000, 2'000, 2, carry(3, "three"), "one");
  log.append(3'000, 4'000, 2, "two");  // carries nothing
  log.append(3'600'000, 3'601'000, 2, carry(5, "five"), "four");
  log.append(5'000, 6'000, 2, carry(4, "four, written last, into an older hour"), "six");
  std::vector<std::string> blocks;
  log.blocks(INT64_MIN, INT64_MAX, false, [&](const TickLog::Block& b) {
    blocks.emplace_back(b.data);
    return true;
  });
  CHECK(blocks == std::vector<std::string>{"one", "two", "six", "four"});  // blocks only
  CHECK(kiwi_test::ticks_in_log(db.path()) == 8);
  CHECK(log.carried() == carry(5, "five"));
  // Damaged (its CRC fails): the next largest.
  add_bytes(db.path() + "-ticks/3600.ticks", "X", TickLog::kHeaderBytes + 5);
  CHECK(log.carried() == carry(4, "four, written last, into an older hour"));
  // Cut short (a torn append): the same.
  fs::resize_file(db.path() + "-ticks/0.ticks", 2 * TickLog::kAlign + TickLog::kHeaderBytes + 8);
  CHECK(log.carried() == carry(3, "three"));
  CHECK(ts_read(log) == std::vector<std::int64_t>{1'000, 3'000});  // the damaged read as missing
  // A size field damaged to 4 GiB: not read (nor allocated), the next largest found.
  log.append(7'200'000, 7'201'000, 2, carry(9, "nine"), "seven");
  add_bytes(db.path() + "-ticks/7200.ticks", std::string("\xf0\xff\xff\xff", 4), 4);
  CHECK(log.carried() == carry(3, "three"));
}
