// cpufreq plugin: the attributes' text, and the sensor on fixture boards: an RK3588's three
// clusters, a Raspberry Pi 4's one policy, intel_pstate's one per core, a VM without cpufreq, a
// capped policy, broken files.
#include <catch2/catch.hpp>

#include "cpufreq_parse.hpp"
#include "cpufreq_sensor.hpp"
#include "sensor_test_util.hpp"

using Catch::Matchers::Contains;
using kiwi_sensor_test::fixture;
using kiwi_sensor_test::Harness;
using kiwi_sensor_test::ScratchTree;
using namespace kiwi::cpufreq;

namespace {
const std::string kPolicies = "sys/devices/system/cpu/cpufreq/";
}

TEST_CASE("cpufreq: kHz become hertz, a governor is one word, CPU lists become ranges") {
  CHECK(parse_khz("1800000\n") == 1.8e9);
  CHECK(parse_khz("0\n") == 0.0);
  for (const char* bad : {"", "fast\n", "-1\n", "1.5\n", "<unknown>\n"}) {
    INFO(bad);
    CHECK_FALSE(parse_khz(bad));
  }
  CHECK(parse_word("schedutil\n") == "schedutil");
  CHECK_FALSE(parse_word("\n"));
  CHECK_FALSE(parse_word("two words\n"));
  CHECK_FALSE(parse_word("bad\x01\n"));
  CHECK(parse_cpu_list("0 1 2 3\n") == "0-3");
  CHECK(parse_cpu_list("4 5\n") == "4-5");
  CHECK(parse_cpu_list("2\n") == "2");
  CHECK(parse_cpu_list("0-3,6\n") == "0-3,6");
  CHECK(parse_cpu_list("6 0 1\n") == "0-1,6");
  for (const char* bad : {"", "\n", "a b\n", "3-1\n", "0-999999\n", "1--2\n"}) {
    INFO(bad);
    CHECK_FALSE(parse_cpu_list(bad));
  }
}

TEST_CASE("cpufreq: an RK3588's three clusters, each with its range and governor") {
  Harness h(fixture("rk3588"));
  CpufreqSensor sensor(h.context());
  const auto r = h.sample(sensor);
  CHECK(r.status == kiwi::SampleStatus::ok);
  CHECK(r.message.empty());
  CHECK(h.sink.label_values("cpufreq_frequency_hertz", "policy") ==
        std::vector<std::string>{"policy0", "policy4", "policy6"});
  CHECK(h.sink.value("cpufreq_frequency_hertz", {{"policy", "policy0"}}) == 1.2e9);
  CHECK(h.sink.value("cpufreq_frequency_hertz", {{"policy", "policy6"}}) == 4.08e8);
  CHECK(h.sink.value("cpufreq_min_frequency_hertz", {{"policy", "policy4"}}) == 4.08e8);
  CHECK(h.sink.value("cpufreq_max_frequency_hertz", {{"policy", "policy4"}}) == 2.352e9);
  CHECK(h.sink.value("cpufreq_hardware_max_frequency_hertz", {{"policy", "policy0"}}) == 1.8e9);
  CHECK(h.sink.value("cpufreq_hardware_min_frequency_hertz", {{"policy", "policy6"}}) == 4.08e8);
  CHECK(h.sink.value("cpufreq_capped", {{"policy", "policy6"}}) == 0.0);
  CHECK(h.sink.value("cpufreq_policy_info", {{"policy", "policy4"},
                                             {"cpus", "4-5"},
                                             {"governor", "schedutil"},
                                             {"driver", "cpufreq-dt"}}) == 1.0);
}

TEST_CASE("cpufreq: a Pi 4 has one policy, intel_pstate one per core, a VM none") {
  Harness pi(fixture("rpi4"));
  CpufreqSensor one(pi.context());
  CHECK(pi.sample(one).status == kiwi::SampleStatus::ok);
  CHECK(pi.sink.count("cpufreq_frequency_hertz") == 1);
  CHECK(pi.sink.value("cpufreq_policy_info", {{"policy", "policy0"},
                                              {"cpus", "0-3"},
                                              {"governor", "ondemand"},
                                              {"driver", "cpufreq-dt"}}) == 1.0);
  Harness x86(fixture("x86"));
  CpufreqSensor cores(x86.context());
  CHECK(x86.sample(cores).status == kiwi::SampleStatus::ok);
  CHECK(x86.sink.count("cpufreq_frequency_hertz") == 4);
  CHECK(x86.sink.value("cpufreq_frequency_hertz", {{"policy", "policy1"}}) == 2.9e9);
  CHECK(x86.sink.value("cpufreq_policy_info", {{"policy", "policy3"},
                                               {"cpus", "3"},
                                               {"governor", "powersave"},
                                               {"driver", "intel_pstate"}}) == 1.0);
  Harness vm(fixture("vm"));
  CpufreqSensor none(vm.context());
  const auto r = vm.sample(none);
  CHECK(r.status == kiwi::SampleStatus::no_data);
  CHECK_THAT(r.message, Contains("no cpufreq policies: " + vm.sysfs +
                                 "/devices/system/cpu/cpufreq is missing or empty"));
}

TEST_CASE("cpufreq: a Pi 5's Cortex-A76 cores idle at 1.5 GHz of 1.5-2.4 GHz, not capped") {
  Harness pi(fixture("rpi5"));
  CpufreqSensor sensor(pi.context());
  CHECK(pi.sample(sensor).status == kiwi::SampleStatus::ok);
  const std::map<std::string, std::string> p0{{"policy", "policy0"}};
  CHECK(pi.sink.count("cpufreq_frequency_hertz") == 1);
  CHECK(pi.sink.value("cpufreq_frequency_hertz", p0) == 1.5e9);
  CHECK(pi.sink.value("cpufreq_hardware_min_frequency_hertz", p0) == 1.5e9);
  CHECK(pi.sink.value("cpufreq_hardware_max_frequency_hertz", p0) == 2.4e9);
  CHECK(pi.sink.value("cpufreq_capped", p0) == 0.0);
  CHECK(pi.sink.value("cpufreq_policy_info", {{"policy", "policy0"},
                                              {"cpus", "0-3"},
                                              {"governor", "ondemand"},
                                              {"driver", "cpufreq-dt"}}) == 1.0);
}

TEST_CASE("cpufreq: a scaling maximum below the hardware's is a capped policy") {
  ScratchTree tree("rk3588");
  tree.write(kPolicies + "policy6/scaling_max_freq", "1416000\n");  // a thermal limit, or a user
  Harness h(tree.root());
  CpufreqSensor sensor(h.context());
  CHECK(h.sample(sensor).status == kiwi::SampleStatus::ok);
  CHECK(h.sink.value("cpufreq_capped", {{"policy", "policy6"}}) == 1.0);
  CHECK(h.sink.value("cpufreq_max_frequency_hertz", {{"policy", "policy6"}}) == 1.416e9);
  CHECK(h.sink.value("cpufreq_capped", {{"policy", "policy4"}}) == 0.0);
  tree.remove(kPolicies + "policy4/cpuinfo_max_freq");  // no hardware maximum: no verdict
  h.sink.samples.clear();
  CHECK(h.sample(sensor).status == kiwi::SampleStatus::ok);
  CHECK_FALSE(h.sink.value("cpufreq_capped", {{"policy", "policy4"}}));
  CHECK(h.sink.value("cpufreq_frequency_hertz", {{"policy", "policy4"}}) == 2.352e9);
}

TEST_CASE("cpufreq: a file that cannot be read or parsed is named once, the rest arrives") {
  ScratchTree tree("rk3588");
  tree.write(kPolicies + "policy4/scaling_cur_freq", "fast\n");
  tree.make_unreadable(kPolicies + "policy0/scaling_governor");
  tree.write(kPolicies + "policy6/related_cpus", "six seven\n");
  Harness h(tree.root());
  CpufreqSensor sensor(h.context());
  const auto r = h.sample(sensor);
  CHECK(r.status == kiwi::SampleStatus::ok);
  CHECK_THAT(r.message, Contains("policy4/scaling_cur_freq: not a value: 'fast\\x0a'") &&
                            Contains("policy0/scaling_governor") &&
                            Contains("policy6/related_cpus: not a CPU list: 'six seven\\x0a'"));
  CHECK_FALSE(h.sink.value("cpufreq_frequency_hertz", {{"policy", "policy4"}}));
  CHECK(h.sink.value("cpufreq_max_frequency_hertz", {{"policy", "policy4"}}) == 2.352e9);
  CHECK(h.sink.count("cpufreq_policy_info") == 2);  // policy0's governor is unreadable
  // Without a CPU list, policy6 is named after its number, which is its first CPU.
  CHECK(h.sink.value("cpufreq_policy_info", {{"policy", "policy6"},
                                             {"cpus", "6"},
                                             {"governor", "schedutil"},
                                             {"driver", "cpufreq-dt"}}) == 1.0);
  CHECK(h.log.count(kiwi::LogLevel::warn) == 1);
  h.sample(sensor);  // the same problems: not logged again
  CHECK(h.log.count(kiwi::LogLevel::warn) == 1);
}

TEST_CASE("cpufreq: policies without a readable frequency make the sample an error") {
  ScratchTree tree("rpi4");
  tree.write(kPolicies + "policy0/scaling_cur_freq", "\n");
  tree.remove(kPolicies + "policy0/scaling_min_freq");
  Harness h(tree.root());
  CpufreqSensor sensor(h.context());
  CHECK_THROWS_WITH(h.sample(sensor), Contains("policy0/scaling_cur_freq: not a value"));
}
