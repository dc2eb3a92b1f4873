// The remote_write output: POSTs Prometheus remote write 1.0 requests with libcurl, through
// plugins/common's POST (one curl handle per [[remote_write]], its connection kept alive between
// requests; write() is never called concurrently for one object, kiwi/output.hpp).
#include <kiwi/output.hpp>
#include <stdexcept>
#include <string>

#include "http_post.hpp"
#include "remote_write.hpp"

namespace {

using kiwi::OptionSpec;
using kiwi::OptionType;

const OptionSpec kOptions[] = {
    {"url", OptionType::string, "\"\"",
     "the receiver's remote write endpoint, e.g. \"http://prometheus:9090/api/v1/write\" "
     "(required)"},
    kiwi_http::kTimeoutOption,
    kiwi_http::kHeadersOption,
    kiwi_http::kBasicAuthOption,
    {"labels", OptionType::string_table, "{}",
     "external labels added to every series that lacks them; `instance` defaults to the host "
     "name (set instance = \"\" to leave it out)"},
};

class RemoteWrite final : public kiwi::Output {
 public:
  explicit RemoteWrite(const kiwi::OutputContext& ctx)
      : client_(kiwi_http::target_from(ctx.options, "http://127.0.0.1:9090/api/v1/write", ""),
                "kiwi-agent/" + std::string(ctx.agent_version)) {
    bool instance_set = false;
    for (const auto& [k, v] : ctx.options.get_table("labels")) {
      external_.emplace_back(k, v);
      instance_set |= k == "instance";
    }
    if (!instance_set) external_.emplace_back("instance", std::string(ctx.host_name));
  }

  kiwi::WriteResult write(const kiwi::OutputBatch& batch) override {
    static const std::string kHeaders[] = {"Content-Encoding: snappy",
                                           "Content-Type: application/x-protobuf",
                                           "X-Prometheus-Remote-Write-Version: 0.1.0"};
    return client_.post(kiwi_remote_write::compress_snappy(kiwi_remote_write::encode_write_request(
                            kiwi_remote_write::to_time_series(batch, external_))),
                        kHeaders);
  }

 private:
  kiwi_http::Client client_;
  kiwi_remote_write::Labels external_;
};

}  // namespace

KIWI_OUTPUT_PLUGIN(RemoteWrite, "remote_write",
                   "Prometheus remote write 1.0 (protobuf, snappy) over HTTP, with backfill",
                   kOptions)
