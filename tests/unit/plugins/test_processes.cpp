// processes plugin: /proc/[pid]/stat parsing, and the sensor on fixture boards: counts by state,
// the top by CPU (from the second sample) and by resident memory, processes that come, go or
// reuse a pid, an unreadable or damaged stat file, hidden processes, and the bound on its series.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cctype>
#include <set>

#include "processes_parse.hpp"
#include "processes_sensor.hpp"
#include "sensor_test_util.hpp"

using Catch::Matchers::Contains;
using kiwi_sensor_test::fixture;
using kiwi_sensor_test::Harness;
using kiwi_sensor_test::read_text;
using kiwi_sensor_test::ScratchTree;
using namespace kiwi::processes;

namespace {

const double kPage = static_cast<double>(::sysconf(_SC_PAGESIZE));

// One rank of a list as the dashboard reads it: the command and pid, the CPU share (when there is
// one) and the resident bytes.
struct Row {
  std::string command;
  double pid = 0;
  std::optional<double> cpu;
  std::optional<double> resident;
};

// The sensor on a scratch copy of a fixture board (none: an empty tree), with the option table's
// defaults but `top`. sample() forgets the previous sample's metrics, so `h.sink` holds one.
struct Board {
  explicit Board(std::string_view name = {}, std::int64_t top = 5)
      : tree(name),
        h(tree.root(),
          kiwi_sensor_test::with_int(kiwi_sensor_test::default_values(kOptions), "top", top)),
        sensor(h.context()) {}

  kiwi::SampleResult sample() {
    h.sink.clear();
    return h.sample(sensor);
  }
  std::optional<double> state(const std::string& name) const {
    return h.sink.value("processes_state", {{"state", name}});
  }
  Row row(const std::string& by, int rank) const {
    Row r;
    const std::string n = std::to_string(rank);
    for (const auto& s : h.sink.samples)
      if (s.name == "processes_top_pid" && s.labels.at("by") == by && s.labels.at("rank") == n) {
        r.command = s.labels.at("command");
        r.pid = s.value;
      }
    r.cpu = h.sink.value("processes_top_cpu_ratio", {{"by", by}, {"rank", n}});
    r.resident = h.sink.value("processes_top_resident_bytes", {{"by", by}, {"rank", n}});
    return r;
  }
  // The commands of a list, rank 1 first.
  std::vector<std::string> commands(const std::string& by) const {
    std::vector<std::string> out;
    for (const auto& s : h.sink.samples)
      if (s.name == "processes_top_pid" && s.labels.at("by") == by)
        out.push_back(s.labels.at("command"));
    return out;
  }

  ScratchTree tree;
  Harness h;
  ProcessesSensor sensor;
};

// A stat line of a process with the fields the sensor reads, the others as a kernel writes them.
std::string stat_line(int pid, const std::string& comm, char state, std::uint64_t utime,
                      std::uint64_t stime, std::uint64_t start, std::uint64_t rss) {
  return std::to_string(pid) + " (" + comm + ") " + state + " 1 " + std::to_string(pid) + " " +
         std::to_string(pid) + " 0 -1 4194304 100 0 0 0 " + std::to_string(utime) + " " +
         std::to_string(stime) + " 0 0 20 0 1 0 " + std::to_string(start) + " 8192000 " +
         std::to_string(rss) +
         " 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 "
         "0 0 0 0 0\n";
}

}  // namespace

TEST_CASE("processes: a stat line's command, state, CPU ticks, threads, start and RSS") {
  // The command name is a view into the text: each text is kept while its result is used.
  const std::string tmux_text = read_text(fixture("x86/proc/1210/stat"));
  const PidStat tmux = parse_pid_stat(tmux_text);
  CHECK(tmux.pid == 1210);
  CHECK(tmux.comm == "tmux: server");  // a space: not split
  CHECK(tmux.state == 'S');
  CHECK(tmux.cpu_ticks == 3011 + 1290);  // utime + stime
  CHECK(tmux.threads == 1);
  CHECK(tmux.start_ticks == 4180);
  CHECK(tmux.rss_pages == 1344);
  const std::string sd_pam_text = read_text(fixture("rpi4/proc/1336/stat"));
  CHECK(parse_pid_stat(sd_pam_text).comm == "(sd-pam)");
  const PidStat ffmpeg = parse_pid_stat(read_text(fixture("x86/proc/45120/stat")));
  CHECK(ffmpeg.threads == 4);
  CHECK(ffmpeg.state == 'R');
  // A kernel thread: no user time, no memory of its own.
  const std::string flush_text = read_text(fixture("rpi4/proc/2087/stat"));
  const PidStat flush = parse_pid_stat(flush_text);
  CHECK(flush.comm == "kworker/u8:1+flush-179:0");
  CHECK(flush.cpu_ticks == 412);
  CHECK(flush.rss_pages == 0);
  // A command that holds ") Z 1 (": read from the last ')', it is a running process.
  const std::string tricky_text = read_text(fixture("awkward/proc/3120/stat"));
  const PidStat tricky = parse_pid_stat(tricky_text);
  CHECK(tricky.comm == "tricky) Z 1 (x");
  CHECK(tricky.state == 'R');
  CHECK(tricky.cpu_ticks == 88012 + 9120);
  CHECK(tricky.rss_pages == 3072);
  // A zombie has kept its times and lost its memory.
  const PidStat zombie = parse_pid_stat(read_text(fixture("rpi4/proc/2230/stat")));
  CHECK(zombie.state == 'Z');
  CHECK(zombie.cpu_ticks == 3);
  CHECK(zombie.rss_pages == 0);
  // Without a newline, and with the fields after rss missing (they are not read).
  CHECK(parse_pid_stat("7 (a b) S 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 3 0 99 0 12").rss_pages == 12);
}

TEST_CASE("processes: a stat line that is not one is refused, naming what is wrong") {
  for (const char* bad :
       {"", "garbage\n", "12 x) S 1\n", "(x) S 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 3 0 99 0 12\n",
        "12 (x) 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 3 0 99 0 12\n",
        "12 (x) S 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 3 0 99 0\n",
        "12 (x) S 1 1 1 0 -1 0 0 0 0 0 -5 6 0 0 20 0 3 0 99 0 12\n", "12 (x\n", "x) 12 (\n"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_pid_stat(bad), std::invalid_argument);
  }
  CHECK_THROWS_WITH(parse_pid_stat("12 (x) S 1 1 1 0 -1 0 0 0 0 0 five 6 0 0 20 0 3 0 99 0 12\n"),
                    "field 14 is not a number: '12 (x) S 1 1 1 0 -1 0 0 0 0 0 five 6 0 0 20 0 3 0 "
                    "99 0 12'");
  CHECK_THROWS_WITH(parse_pid_stat("12 (x) S 1 2\n"), "fewer than 24 fields: '12 (x) S 1 2'");
}

TEST_CASE("processes: the ticks of all cores from /proc/stat's cpu line, as the cpu sensor sums") {
  // rpi4: 749732 + 7871 + 221874 + 13803331 + 22196 + 0 + 13779 + 0; guest columns left out.
  CHECK(parse_cpu_total_ticks(read_text(fixture("rpi4/proc/stat"))) == 14818783u);
  CHECK(*parse_cpu_total_ticks(read_text(fixture("rpi4/next/proc/stat"))) -
            *parse_cpu_total_ticks(read_text(fixture("rpi4/proc/stat"))) ==
        400);
  CHECK(parse_cpu_total_ticks("cpu 1 2 3 4\n") == 10u);  // a kernel before 2.6.0: 4 columns
  CHECK(parse_cpu_total_ticks("cpu 1 2 3 4 5 6 7 8 100 100\n") == 36u);
  CHECK_FALSE(parse_cpu_total_ticks("cpu0 1 2 3 4\nintr 5\n"));
  CHECK_THROWS_WITH(parse_cpu_total_ticks("cpu 1 2 x 4\n"), Contains("'x' is not a counter"));
  CHECK_THROWS_WITH(parse_cpu_total_ticks("cpu 1 2\n"), Contains("expected at least 4 counters"));
}

TEST_CASE("processes: each state letter counts in its state, an unknown one in other") {
  auto label = [](char c) { return std::string(kStates[state_index(c)].label); };
  CHECK(label('R') == "running");
  CHECK(label('S') == "sleeping");
  CHECK(label('D') == "disk_sleep");
  CHECK(label('T') == "stopped");
  CHECK(label('t') == "stopped");
  CHECK(label('Z') == "zombie");
  CHECK(label('I') == "idle");
  CHECK(label('P') == "parked");
  CHECK(label('X') == "dead");
  CHECK(label('x') == "dead");
  CHECK(label('W') == "other");
  CHECK(label('K') == "other");
  CHECK(label('?') == "other");
}

TEST_CASE("processes: a Raspberry Pi 4: by memory at once, by CPU from the second sample") {
  Board b("rpi4");
  const auto first = b.sample();
  CHECK(first.status == kiwi::SampleStatus::ok);
  CHECK(first.message ==
        "first sample: CPU shares need two readings, the top by cpu comes with the next");
  CHECK(b.state("running") == 2);
  CHECK(b.state("sleeping") == 20);
  CHECK(b.state("disk_sleep") == 1);  // jbd2 on the SD card
  CHECK(b.state("idle") == 4);
  CHECK(b.state("zombie") == 1);
  CHECK(b.state("stopped") == 0);  // every state, 0 or not
  CHECK(b.h.sink.count("processes_state") == std::size(kStates));
  CHECK(b.h.sink.value("processes_pids") == 28);
  CHECK(b.h.sink.value("processes_threads") == 36);
  CHECK(b.h.sink.count("processes_top_cpu_ratio") == 0);
  CHECK(b.commands("cpu").empty());
  CHECK(b.commands("memory") == std::vector<std::string>{"python3", "NetworkManager", "systemd",
                                                         "systemd-journal", "systemd"});
  const Row top = b.row("memory", 1);
  CHECK(top.pid == 1893);
  CHECK(top.resident == 11264 * kPage);
  CHECK_FALSE(top.cpu);
  CHECK(b.row("memory", 5).pid == 1335);  // the user's systemd, after pid 1's

  // One second later: 400 ticks of all cores. A vcgencmd started within the second: all of its
  // 3 ticks are in it. Three processes used 1 tick: the lowest pid ranks first.
  b.tree.advance("rpi4");
  CHECK(b.sample().message.empty());
  CHECK(b.commands("cpu") == std::vector<std::string>{"python3", "kiwi-agent", "vcgencmd",
                                                      "kworker/u8:1+flush-179:0", "ksoftirqd/0"});
  CHECK(b.row("cpu", 1).cpu == 20.0 / 400);
  CHECK(b.row("cpu", 1).resident == 11264 * kPage);
  CHECK(b.row("cpu", 2).cpu == 0.01);
  CHECK(b.row("cpu", 3).pid == 2232);
  CHECK(b.row("cpu", 3).cpu == 3.0 / 400);
  CHECK(b.row("cpu", 4).cpu == 0.005);
  CHECK(b.row("cpu", 4).resident == 0);  // a kernel thread
  CHECK(b.row("cpu", 5).pid == 14);
  CHECK(b.row("memory", 1).cpu == 0.05);  // the memory list has CPU shares now too
  CHECK(b.row("memory", 2).cpu == 0);     // NetworkManager used none
  CHECK(b.h.sink.value("processes_pids") == 29);
  CHECK(b.state("running") == 3);
}

TEST_CASE("processes: an x86 mini PC: a transcode, a backup in disk sleep, a stopped editor") {
  Board b("x86");
  b.sample();
  CHECK(b.state("disk_sleep") == 2);
  CHECK(b.state("stopped") == 1);
  CHECK(b.state("zombie") == 1);
  CHECK(b.h.sink.value("processes_threads") == 43);
  CHECK(b.row("memory", 1).command == "ffmpeg");
  CHECK(b.row("memory", 1).resident == 98304 * kPage);
  b.tree.advance("x86");
  b.sample();
  CHECK(b.commands("cpu") == std::vector<std::string>{"ffmpeg", "rsync", "rsync", "kiwi-agent",
                                                      "kworker/u8:0+flush-259:3"});
  CHECK(b.row("cpu", 1).cpu == 65.0 / 400);  // ffmpeg's 4 threads: a share of all cores
  CHECK(b.row("cpu", 2).pid == 44871);
  CHECK(b.row("cpu", 2).cpu == 0.04);
  CHECK(b.row("cpu", 4).pid == 789);  // 3 ticks each: pid 789 before 44902
  CHECK(b.row("cpu", 5).pid == 44902);
  CHECK(b.commands("memory") ==
        std::vector<std::string>{"ffmpeg", "rsync", "rsync", "python3", "NetworkManager"});
}

TEST_CASE("processes: odd commands and states, and a pid reused by a new process") {
  Board b("awkward");
  b.sample();
  CHECK(b.state("parked") == 2);   // cpu3's, offline
  CHECK(b.state("stopped") == 1);  // t: under gdb
  CHECK(b.state("other") == 1);    // W: 3.10's waking
  CHECK(b.state("zombie") == 1);   // not the tricky one
  CHECK(b.state("idle") == 0);     // no I before 4.14
  CHECK(b.row("memory", 2).command == "tricky) Z 1 (x");
  // pid 9871 was tar (550 ticks) and is md5sum now (30 ticks, started within the second): its 30
  // ticks count, not 30 - 550.
  b.tree.advance("awkward");
  b.sample();
  CHECK(b.commands("cpu") ==
        std::vector<std::string>{"tricky) Z 1 (x", "md5sum", "mmcqd/0", "ksoftirqd/0", "rsyslogd"});
  CHECK(b.row("cpu", 1).cpu == 0.1);  // 60 of 600 ticks: six cores online
  CHECK(b.row("cpu", 2).cpu == 0.05);
  CHECK(b.row("cpu", 2).pid == 9871);
}

TEST_CASE("processes: a process that ended or has no stat is left out without a note") {
  Board b("rpi4");
  b.sample();
  b.tree.advance("rpi4");
  b.tree.remove("proc/1893");          // python3 ended
  b.tree.remove("proc/447/stat");      // gone between the listing and the read (openat: ENOENT)
  b.tree.write("proc/3000/stat", "");  // read as it ended: no bytes
  const auto r = b.sample();
  CHECK(r.status == kiwi::SampleStatus::ok);
  CHECK(r.message == "");
  CHECK(b.h.sink.value("processes_pids") == 27);  // and vcgencmd started
  CHECK(b.commands("cpu").front() == "kiwi-agent");
  CHECK(b.commands("memory") ==
        std::vector<std::string>{"systemd", "systemd-journal", "systemd", "sshd", "kiwi-agent"});
  CHECK(b.h.log.lines.empty());
}

TEST_CASE("processes: an unreadable or damaged stat is named and logged once, the rest arrives") {
  Board b("x86");
  b.tree.make_unreadable("proc/655/stat");  // read() fails (EISDIR), as EIO would
  b.tree.write("proc/661/stat", "garbage\n");
  const auto r = b.sample();
  CHECK(r.status == kiwi::SampleStatus::ok);
  CHECK_THAT(r.message, Contains(b.h.procfs + "/655/stat: Is a directory") &&
                            Contains(b.h.procfs + "/661/stat: not a stat line, no (command): "
                                                  "'garbage'"));
  CHECK(b.h.sink.value("processes_pids") == 29);
  CHECK(b.commands("memory") ==
        std::vector<std::string>{"ffmpeg", "rsync", "rsync", "python3", "systemd-journal"});
  CHECK(b.h.log.count(kiwi::LogLevel::warn) == 1);
  b.sample();  // the same failure: not logged again
  CHECK(b.h.log.count(kiwi::LogLevel::warn) == 1);
  // Many failing: the first three named, the rest counted.
  for (const char* pid : {"1", "2", "3", "4", "6"})
    b.tree.write("proc/" + std::string(pid) + "/stat", "x");
  CHECK_THAT(b.sample().message, Contains("; 4 more stat files failed"));
  // None readable: an error naming them.
  for (const auto& entry : std::filesystem::directory_iterator(b.h.procfs))
    if (std::isdigit(static_cast<unsigned char>(entry.path().filename().string()[0])))
      b.tree.write("proc/" + entry.path().filename().string() + "/stat", "x");
  CHECK_THROWS_WITH(b.sample(), Contains("/stat: not a stat line"));
}

TEST_CASE("processes: a process whose stat failed last time gets a CPU share from the next") {
  Board b("x86");
  b.tree.make_unreadable("proc/45120/stat");
  b.sample();
  b.tree.remove("proc/45120/stat");
  b.tree.advance("x86");
  CHECK(b.sample().message.empty());
  // Not all of ffmpeg's 1.39 million ticks as this second's: no share this time...
  CHECK(b.commands("cpu") == std::vector<std::string>{"rsync", "rsync", "kiwi-agent",
                                                      "kworker/u8:0+flush-259:3",
                                                      "jbd2/nvme1n1p1-8"});
  CHECK(b.row("memory", 1).command == "ffmpeg");
  CHECK_FALSE(b.row("memory", 1).cpu);
  // ...and its delta from then on.
  b.sample();
  b.tree.write("proc/45120/stat", stat_line(45120, "ffmpeg", 'R', 1340167, 50213, 3281200, 98304));
  b.tree.write("proc/stat", "cpu  1177976 4857 387323 11599583 31974 0 11047 0 0 0\n");
  b.sample();
  CHECK(b.row("cpu", 1).command == "ffmpeg");
  CHECK(b.row("cpu", 1).cpu == 100.0 / 400);
}

TEST_CASE("processes: no procfs, or one without processes, is no data") {
  Board empty;
  auto r = empty.sample();
  CHECK(r.status == kiwi::SampleStatus::no_data);
  CHECK(r.message == "no processes: " + empty.h.procfs + " is missing");
  Board vm("vm");
  r = vm.sample();
  CHECK(r.status == kiwi::SampleStatus::no_data);
  CHECK_THAT(r.message, Contains("has no numbered directories"));
}

TEST_CASE("processes: without /proc/stat's ticks there are no CPU shares, and it says why") {
  Board b("rpi4");
  b.tree.remove("proc/stat");
  b.sample();
  b.tree.advance("rpi4");
  b.tree.remove("proc/stat");
  const auto r = b.sample();
  CHECK(r.status == kiwi::SampleStatus::ok);
  CHECK(r.message == b.h.procfs + "/stat: not found: no CPU shares");
  CHECK(b.commands("cpu").empty());
  CHECK(b.commands("memory").size() == 5);
  // Ticks that do not advance (a frozen clock, a resume) give no shares for that sample.
  b.tree.advance("rpi4");
  b.sample();
  CHECK_THAT(b.sample().message, Contains("went backwards or did not advance"));
  CHECK(b.commands("cpu").empty());
}

TEST_CASE("processes: without process 1 the processes are hidden, and it says how to see them") {
  Board b("rpi4");
  b.tree.remove("proc/1");
  b.sample();
  CHECK_THAT(b.sample().message, Contains("process 1 is not visible") &&
                                     Contains("only those are counted") &&
                                     Contains("ProtectProc=default"));
}

TEST_CASE("processes: top sets how many each list ranks") {
  Board b("rpi4", 2);
  b.sample();
  b.tree.advance("rpi4");
  b.sample();
  CHECK(b.commands("cpu") == std::vector<std::string>{"python3", "kiwi-agent"});
  CHECK(b.h.sink.count("processes_top_resident_bytes") == 4);
}

TEST_CASE("processes: its series stay bounded whatever runs: past 1000 named, (other)") {
  // 20 processes whose names change every sample: each sample names 20 new series of the memory
  // list, so the 51st finds the sensor's 1000 taken and reports its names as "(other)".
  Board b("", 20);
  std::set<std::string> series;
  for (int sample = 0; sample < 60; ++sample) {
    for (int i = 0; i < 20; ++i)
      b.tree.write("proc/" + std::to_string(100 + i) + "/stat",
                   stat_line(100 + i, "job" + std::to_string(sample) + "." + std::to_string(i), 'S',
                             5, 5, 100, 1000 + static_cast<std::uint64_t>(i)));
    const auto r = b.sample();
    CHECK((sample < 50) == (r.message.find("(other)") == std::string::npos));
    for (const auto& s : b.h.sink.samples) {
      std::string key = s.name;
      for (const auto& [k, v] : s.labels) key += "," + k + "=" + v;
      series.insert(key);
    }
  }
  CHECK(b.row("memory", 1).command == "(other)");
  CHECK(b.row("memory", 1).pid == 119);  // the pid and the values still come
  // 1000 named + 20 "(other)" + 20 resident + the states, pids and threads: no more, ever.
  CHECK(series.size() == 1000 + 20 + 20 + std::size(kStates) + 2);
}

TEST_CASE("processes: this machine's /proc reads without a failure and finds this test") {
  Harness h("/", kiwi_sensor_test::default_values(kOptions));
  ProcessesSensor sensor(h.context());
  const auto r = h.sample(sensor);
  CHECK(r.status == kiwi::SampleStatus::ok);
  CHECK_THAT(r.message, !Contains("/stat:"));
  double states = 0;
  for (const auto& s : h.sink.samples)
    if (s.name == "processes_state") states += s.value;
  CHECK(states == h.sink.value("processes_pids"));
  CHECK(h.sink.value("processes_threads") >= 1);  // a process tearing down may count none
  CHECK(h.sink.value("processes_top_resident_bytes", {{"by", "memory"}, {"rank", "1"}}) > 0);
}
