#include "snapshot.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <kiwi/gzip.hpp>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace kiwi::agent {

namespace {
using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void key(Writer& w, std::string_view k) {
  w.Key(k.data(), static_cast<rapidjson::SizeType>(k.size()));
}
void str(Writer& w, std::string_view s) {
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
}

// Integral values print without ".0" (byte counts, hertz); others rounded to 6 decimals, then in
// their shortest form (RapidJSON's MaxDecimalPlaces truncates instead of rounding).
void number(Writer& w, double v) {
  if (std::nearbyint(v) == v && std::fabs(v) < 9e15)
    w.Int64(static_cast<std::int64_t>(v));
  else
    w.Double(std::nearbyint(v * 1e6) / 1e6);
}
}  // namespace

std::string render_snapshot_json(const Snapshot& s) {
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  key(w, "version"), w.Int(1);
  key(w, "host"), str(w, s.host);
  key(w, "sequence"), w.Uint64(s.sequence);
  key(w, "timestamp"), number(w, s.timestamp);
  key(w, "interval_seconds"), number(w, s.interval_seconds);
  key(w, "stale"), w.Bool(false);  // the current handler turns it true (see Snapshot::json)
  key(w, "agent");
  w.StartObject();
  key(w, "version"), str(w, s.agent_version);
  key(w, "uptime_seconds"), number(w, std::floor(std::max(0.0, s.timestamp - s.started_at)));
  w.EndObject();
  key(w, "sensors");
  w.StartObject();
  for (auto& r : s.sensors) {
    key(w, r.name);
    w.StartObject();
    key(w, "plugin"), str(w, r.plugin);
    key(w, "status"), str(w, to_string(r.state));
    if (!r.message.empty()) key(w, "message"), str(w, r.message);
    key(w, "timestamp"), number(w, r.timestamp);
    key(w, "duration_seconds"), number(w, r.duration_seconds);
    if (r.errors_total) key(w, "errors_total"), w.Uint64(r.errors_total);
    if (r.invalid_metrics_total) key(w, "invalid_metrics_total"), w.Uint64(r.invalid_metrics_total);
    key(w, "metrics");
    w.StartArray();
    for (auto& m : r.metrics) {
      w.StartObject();
      key(w, "name"), str(w, m.name);
      if (!m.labels.empty()) {
        key(w, "labels");
        w.StartObject();
        for (auto& [k, v] : m.labels) key(w, k), str(w, v);
        w.EndObject();
      }
      key(w, "value"), number(w, m.value);
      key(w, "unit"), str(w, m.unit);
      if (m.kind == MetricKind::counter) key(w, "kind"), str(w, "counter");
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndObject();
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

void render_body(Snapshot& s) {
  s.json = std::make_shared<const LazyGzip>(
      std::make_shared<const std::string>(render_snapshot_json(s)));
}

void write_file_atomically(const std::string& path, std::string_view content) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), tmp);
  std::size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw std::system_error(err, std::generic_category(), tmp);
    }
    done += static_cast<std::size_t>(n);
  }
  // No fsync: the file lives on tmpfs by default and is rewritten every tick; rename() alone
  // guarantees readers never see a half-written file.
  if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw std::system_error(err, std::generic_category(), path);
  }
}

SnapshotFile::SnapshotFile(std::string path) : path_(std::move(path)) {
  const auto dir = std::filesystem::path(path_).parent_path();
  std::error_code ec;
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (ec)
    throw std::runtime_error("snapshot file " + path_ + ": cannot create " + dir.string() + ": " +
                             ec.message());
  const std::string lock = path_ + ".lock";
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0)
    throw std::runtime_error("snapshot file " + path_ + ": cannot open " + lock + ": " +
                             std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char pid[32] = {};
    (void)!::pread(lock_fd_, pid, sizeof pid - 1, 0);
    ::close(lock_fd_);
    lock_fd_ = -1;
    std::string holder(pid);
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    if (err == EWOULDBLOCK)
      throw SnapshotFileInUse(
          "snapshot file " + path_ + " is in use by another kiwi-agent" +
          (holder.empty() ? "" : " (pid " + holder + ")") +
          "; give each agent its own [collector] snapshot_path and [agent] data_dir");
    throw std::runtime_error("snapshot file " + path_ + ": cannot lock " + lock + ": " +
                             std::strerror(err));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(lock_fd_, 0) == 0) (void)!::pwrite(lock_fd_, pid.data(), pid.size(), 0);
}

SnapshotFile::~SnapshotFile() {
  // The file goes before the lock: another agent may take the path as soon as it is unlocked. The
  // lock file stays (removing it would let two agents lock two different files of one name).
  ::unlink(path_.c_str());
  ::unlink((path_ + ".tmp").c_str());
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

SnapshotHolder::SnapshotHolder() {
  auto empty = std::make_shared<Snapshot>();
  render_body(*empty);
  current_.store(std::move(empty));
}

}  // namespace kiwi::agent
