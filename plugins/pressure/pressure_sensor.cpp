#include "pressure_sensor.hpp"

#include <system_error>
#include <tuple>

#include "pressure_parse.hpp"

namespace kiwi::pressure {

namespace {
constexpr std::string_view kResources[] = {"cpu", "memory", "io"};
}  // namespace

PressureSensor::PressureSensor(const kiwi::SensorContext& ctx)
    : psi_{kiwi::KeptFile(kiwi::join_path(ctx.procfs, "pressure/cpu")),
           kiwi::KeptFile(kiwi::join_path(ctx.procfs, "pressure/memory")),
           kiwi::KeptFile(kiwi::join_path(ctx.procfs, "pressure/io"))},
      vmstat_(kiwi::join_path(ctx.procfs, "vmstat")),
      stat_(kiwi::join_path(ctx.procfs, "stat")),
      pressure_dir_(kiwi::join_path(ctx.procfs, "pressure")),
      log_(ctx.log) {}

template <class Parse>
bool PressureSensor::read(kiwi::KeptFile& file, Parse&& parse) {
  try {
    if (!file.read_into(text_)) return false;
    kiwi::parse_file(file.path(), [&] { parse(text_); });
    return true;
  } catch (const std::system_error& e) {
    // A kernel built with PSI but booted with psi=0: the files are there, reading them fails.
    if (e.code() == std::errc::operation_not_supported) {
      psi_off_ = true;
      return false;
    }
    failed_.push_back(e.what());
  } catch (const std::exception& e) {
    failed_.push_back(e.what());
  }
  return false;
}

kiwi::SampleResult PressureSensor::sample(kiwi::MetricSink& sink) {
  bool any = false;
  std::size_t psi_files = 0;
  psi_off_ = false;
  failed_.clear();
  for (std::size_t i = 0; i < psi_.size(); ++i) {
    Psi psi;
    if (!read(psi_[i], [&](std::string_view text) { psi = parse_psi(text); })) continue;
    ++psi_files;
    const std::string_view resource = kResources[i];
    for (const auto& [line, ratio, seconds] : {std::tuple{psi.some, &kSomeRatio, &kSomeSeconds},
                                               std::tuple{psi.full, &kFullRatio, &kFullSeconds}}) {
      if (!line) continue;
      sink.emit(*ratio, {resource, "10s"}, line->avg10);
      sink.emit(*ratio, {resource, "60s"}, line->avg60);
      sink.emit(*ratio, {resource, "300s"}, line->avg300);
      sink.emit(*seconds, {resource}, static_cast<double>(line->total_us) / 1e6);
      any = true;
    }
  }
  VmEvents vm;
  if (read(vmstat_, [&](std::string_view text) { vm = parse_vmstat(text); }))
    for (const auto& [value, spec] :
         {std::pair{vm.oom_kill, &kOomKills}, std::pair{vm.pgmajfault, &kMajorFaults},
          std::pair{vm.pswpin, &kSwapIn}, std::pair{vm.pswpout, &kSwapOut}})
      if (value) {
        sink.emit(*spec, static_cast<double>(*value));
        any = true;
      }
  std::optional<std::uint64_t> btime;
  if (read(stat_, [&](std::string_view text) { btime = parse_btime(text); }) && btime) {
    sink.emit(kBootTime, static_cast<double>(*btime));
    any = true;
  }

  // A file that fails is named and left out; the rest of the sample stands. Logged when the
  // failure starts or changes, not every second.
  std::vector<std::string> notes = failed_;
  if (psi_off_)
    notes.push_back(
        "pressure stall information is off: the kernel was booted with psi=0 (psi=1 "
        "on its command line turns it on)");
  else if (psi_files == 0 && failed_.empty())
    notes.push_back("no pressure stall information: " + pressure_dir_ +
                    " is missing (a kernel before 4.20, or built without CONFIG_PSI)");
  const std::string note = kiwi::join(notes);
  if (!failed_.empty() && note != last_logged_) log_.warn(note);
  last_logged_ = failed_.empty() ? std::string() : note;
  if (!any) {
    if (!failed_.empty()) throw std::runtime_error(note);
    return kiwi::SampleResult::no_data(note);
  }
  return kiwi::SampleResult::ok(note);
}

}  // namespace kiwi::pressure
