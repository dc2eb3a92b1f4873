// The exec sensor's output parsers: the Prometheus text exposition format and the JSON form.
// Every problem is a positioned error in the result, never an exception or a crash.
#include "exec_parse.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in = kiwi_fuzz::text(data, size);
  (void)kiwi::exec::parse_prometheus(in);
  (void)kiwi::exec::parse_json(in);
  for (bool counter : {false, true}) (void)kiwi::exec::unit_from_name(in, counter);
  return 0;
}
