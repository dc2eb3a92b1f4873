// cgi: runs CGI/1.1 programs (RFC 3875) from one directory, one process per request.
#include <limits.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <kiwi/handler.hpp>
#include <kiwi/process.hpp>
#include <random>
#include <stdexcept>

#include "cgi_logic.hpp"
#include "cgi_run.hpp"

namespace {

using kiwi::cgi::Run;

constexpr kiwi::OptionSpec kOptions[] = {
    {"directory", kiwi::OptionType::string, "\"/usr/lib/kiwi-agent/cgi\"",
     "the programs' directory: the first path segment after the route names a file directly in it"},
    {"timeout", kiwi::OptionType::duration, "\"10s\"",
     "how long a program may run; then its process group is killed and the client gets 504"},
    {"max_output", kiwi::OptionType::size, "0",
     "most bytes a program may print (headers and body; 0: no limit, the body is streamed); "
     "more: killed, and 502, or its body cut short once sent"},
    {"max_concurrent", kiwi::OptionType::integer, "2",
     "programs running at once on this route (1-256); a request beyond that gets 503 at once"},
    {"pass_authorization", kiwi::OptionType::boolean, "false",
     "give programs the Authorization and Proxy-Authorization headers (HTTP_AUTHORIZATION)"},
    {"document_root", kiwi::OptionType::string, "\"\"",
     "the tree PATH_INFO maps into: PATH_TRANSLATED is document_root + PATH_INFO, as Apache's "
     "DocumentRoot gives it; \"\": PATH_TRANSLATED is not set"},
};

// The directory's realpath; throws (a factory error, exit 2) if it is not a directory.
std::string real_directory(const std::string& option, const std::string& dir) {
  if (dir.empty())
    throw std::runtime_error("option " + option + " is empty; name the programs' directory");
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    throw std::runtime_error(option + " \"" + dir + "\": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode))
    throw std::runtime_error(option + " \"" + dir + "\" is not a directory");
  char real[PATH_MAX];
  if (!::realpath(dir.c_str(), real))
    throw std::runtime_error(option + " \"" + dir + "\": " + std::strerror(errno));
  return real;
}

class CgiHandler final : public kiwi::Handler {
 public:
  explicit CgiHandler(const kiwi::HandlerContext& ctx)
      : log_(ctx.log),
        // "/cgi/*" -> "/cgi/": what SCRIPT_NAME starts with.
        prefix_(ctx.route_path.ends_with("/*") ? ctx.route_path.substr(0, ctx.route_path.size() - 1)
                                               : ctx.route_path),
        directory_(real_directory("directory", ctx.options.get_string("directory"))),
        document_root_(
            ctx.options.get_string("document_root").empty()
                ? std::string()
                : real_directory("document_root", ctx.options.get_string("document_root"))),
        timeout_(ctx.options.get_duration("timeout")),
        max_output_(ctx.options.get_size("max_output")),
        max_concurrent_(ctx.options.get_int("max_concurrent")),
        pass_authorization_(ctx.options.get_bool("pass_authorization")),
        server_software_("kiwi-agent/" + std::string(ctx.agent_version)) {
    if (!ctx.route_path.ends_with("/*"))
      throw std::runtime_error("the cgi route's path must end in /* (e.g. \"/cgi/*\"), not \"" +
                               std::string(ctx.route_path) + "\"");
    if (max_concurrent_ < 1 || max_concurrent_ > 256)
      throw std::runtime_error("max_concurrent must be from 1 to 256, not " +
                               std::to_string(max_concurrent_));
    if (timeout_.count() <= 0) throw std::runtime_error("timeout must be longer than 0ms");
  }

  std::string_view methods() const override { return "GET, HEAD, POST, PUT, PATCH, DELETE"; }

  kiwi::Response handle(const kiwi::Request& request) override {
    auto split = kiwi::cgi::split_target(prefix_, request.path);
    if (!split.target) return kiwi::Response::error(404, split.error);
    const auto& target = *split.target;
    auto program = kiwi::cgi::resolve_program(directory_, target.name);
    if (!program.error.empty()) return kiwi::Response::error(404, program.error);

    // The one piece of shared state: the count of programs running. A place is held until the
    // program is gone: with a streamed body, until the server lets the stream go.
    auto slot = std::make_shared<Slot>(running_);
    if (slot->count > max_concurrent_) {
      auto r = kiwi::Response::error(503, std::to_string(max_concurrent_) +
                                              " CGI programs are running already (" +
                                              "max_concurrent); try again shortly");
      r.headers.push_back({"Retry-After", "1"});
      return r;
    }

    const std::string script_name = std::string(prefix_) + target.name;
    kiwi::process::Spec spec;
    spec.argv = {program.path};
    spec.env = kiwi::process::safe_environment();
    for (auto& v :
         kiwi::cgi::meta_variables(request, {script_name, target.path_info, server_software_,
                                             pass_authorization_, document_root_}))
      spec.env.push_back(std::move(v));
    spec.cwd = directory_;
    spec.input = request.body;
    const std::string who = "CGI program '" + target.name + "'";
    auto run = std::make_unique<Run>(Run::Settings{
        who, timeout_, max_output_,
        [this](const std::string& detail) { log_.warn("request " + new_id() + ": " + detail); },
        &log_});
    const Run::Head head = run->start_and_read_head(spec);
    const kiwi::process::Result& result = run->result();
    const std::string stderr_note =
        result.stderr_tail.empty() ? "" : "; stderr: " + result.stderr_tail;
    using End = kiwi::process::End;
    switch (head) {
      case Run::Head::spawn_failed:
        return failed(502, who + " " + run->error());
      case Run::Head::timed_out:
        return failed(504, who + " " + kiwi::process::describe(result, timeout_));
      case Run::Head::output_exceeded:
        return failed(502, who + " printed more than " + std::to_string(max_output_) + " bytes" +
                               stderr_note);
      case Run::Head::header_too_large:
        return failed(502, who +
                               ": malformed CGI response: no end of its header block in its "
                               "first " +
                               std::to_string(kiwi::cgi::kMaxHeaderBytes) + " bytes" + stderr_note);
      case Run::Head::complete:
        return streamed(std::move(run), std::move(slot), who);
      case Run::Head::ended:
        break;
    }
    // It ended before the server had its header block: the whole output is the answer.
    if (result.end == End::timed_out)
      return failed(504, who + " " + kiwi::process::describe(result, timeout_));
    auto parsed = kiwi::cgi::parse_response(run->output());
    if (result.end != End::exited || result.exit_status != 0) {
      // How it ended, in process::describe's words, and the stderr lines after what we add.
      kiwi::process::Result end_only;
      end_only.end = result.end;
      end_only.exit_status = result.exit_status;
      end_only.signal = result.signal;
      const std::string ended = who + " " + kiwi::process::describe(end_only, timeout_);
      if (!parsed.response)
        return failed(502, ended + " without a complete response" + stderr_note);
      // A complete response is served even so (a shell script whose last command failed); the
      // failure is logged.
      log_.warn(ended + " after a complete response, which was served" + stderr_note);
    }
    if (!parsed.response) return failed(502, who + ": " + parsed.error + stderr_note);
    kiwi::Response res;
    res.status = parsed.response->status;
    res.content_type = std::move(parsed.response->content_type);
    res.headers = std::move(parsed.response->headers);
    if (!parsed.response->body.empty())
      res.body = std::make_shared<const std::string>(parsed.response->body);
    return res;
  }

 private:
  // Holds one place in the count for the life of a program run; `count` includes this one.
  struct Slot {
    std::atomic<std::int64_t>& counter;
    std::int64_t count;
    explicit Slot(std::atomic<std::int64_t>& c) : counter(c), count(c.fetch_add(1) + 1) {}
    ~Slot() { counter.fetch_sub(1); }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
  };
  // The answer of a program whose header block came before its end: the status and headers
  // from that block, and the body streamed as the program prints it (cgi_run.hpp).
  kiwi::Response streamed(std::unique_ptr<Run> run, std::shared_ptr<Slot> slot,
                          const std::string& who) {
    const std::string_view block = std::string_view(run->output()).substr(0, run->body_start());
    auto parsed = kiwi::cgi::parse_response(block);
    if (!parsed.response) {
      run->discard();
      return failed(502, who + ": " + parsed.error);
    }
    kiwi::Response res;
    res.status = parsed.response->status;
    res.content_type = std::move(parsed.response->content_type);
    res.headers = std::move(parsed.response->headers);
    res.stream = std::make_shared<kiwi::cgi::RunStream>(std::move(run), std::move(slot));
    return res;
  }

  // A new request id for the log: 16 hex digits.
  std::string new_id() {
    char id[17];
    std::snprintf(id, sizeof id, "%016llx",
                  static_cast<unsigned long long>(ids_.fetch_add(0x9e3779b97f4a7c15ull)));
    return id;
  }

  // A program that failed: the client gets the status and a request id, and the log the detail
  // under that id. What a program wrote to stderr (a password it echoed), the program's path and
  // how it ended are the operator's business, not every client's (Apache and lighttpd answer a
  // plain 500 and log the rest).
  kiwi::Response failed(int status, const std::string& detail) {
    const std::string id = new_id();
    log_.warn("request " + id + ": " + detail);
    return kiwi::Response::error(status, std::string(status == 504 ? "the CGI program timed out"
                                                                   : "the CGI program failed") +
                                             "; request " + id + " in the agent's log says why");
  }

  kiwi::Logger& log_;
  std::string prefix_;
  std::string directory_;
  std::string document_root_;  // "" for none
  std::chrono::milliseconds timeout_;
  std::uint64_t max_output_;
  std::int64_t max_concurrent_;
  bool pass_authorization_;
  std::string server_software_;
  std::atomic<std::int64_t> running_{0};
  // Request ids: a random start, then a fixed odd step (distinct for 2^64 requests, and unlike
  // those of the run before).
  std::atomic<std::uint64_t> ids_{std::random_device()() * 0x100000001ull};
};

}  // namespace

KIWI_HANDLER_PLUGIN(CgiHandler, "cgi", "runs CGI/1.1 programs (RFC 3875) from one directory",
                    kOptions)
