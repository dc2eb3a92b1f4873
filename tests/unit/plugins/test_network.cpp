// network plugin: /proc/net/dev, link speed and uptime parsing, rates, and the sensor on fixture
// boards. Expected rates are the deltas between tests/fixtures/<board>/proc/net/dev and
// next/proc/net/dev over exactly one second of uptime (see the board READMEs).
#include <catch2/catch.hpp>
#include <kiwi/rates.hpp>

#include "network_parse.hpp"
#include "network_sensor.hpp"
#include "sensor_test_util.hpp"

using Catch::Matchers::Contains;
using kiwi_sensor_test::fixture;
using kiwi_sensor_test::Harness;
using kiwi_sensor_test::read_text;
using kiwi_sensor_test::ScratchTree;

namespace {

std::vector<kiwi::OptionValue> defaults() {
  return kiwi_sensor_test::default_values(kiwi::network::kOptions);
}

std::vector<std::string> names(const std::vector<kiwi::network::InterfaceCounters>& interfaces) {
  std::vector<std::string> out;
  for (const auto& i : interfaces) out.push_back(i.name);
  return out;
}

// Two samples of `board`: its proc tree, then its next/ overlay one second later.
void two_samples(ScratchTree& tree, std::string_view board, kiwi::network::NetworkSensor& sensor,
                 Harness& h) {
  h.sample(sensor);
  tree.advance(board);
  h.sink.clear();
}

}  // namespace

TEST_CASE("network: /proc/net/dev of an RK3588 gives every interface in file order") {
  const auto interfaces =
      kiwi::network::parse_net_dev(read_text(fixture("rk3588/proc/net/dev"))).interfaces;
  // "docker0:" fills the kernel's 6-character name column, so no space precedes it.
  CHECK(names(interfaces) == std::vector<std::string>{"lo", "eth0", "docker0"});
  const auto& eth0 = interfaces[1].counters;
  CHECK(eth0[0] == 1873456123u);   // receive bytes
  CHECK(eth0[3] == 12u);           // receive drop
  CHECK(eth0[8] == 98765432101u);  // transmit bytes: past 2^32, 64-bit counters
  CHECK(eth0[9] == 71234567u);     // transmit packets
}

TEST_CASE("network: a wide counter glued to the colon, as old kernels print it, still parses") {
  const auto interfaces = kiwi::network::parse_net_dev(
                              "  eth0:1234567890 2 3 4 5 6 7 8 9876543210 10 11 12 13 14 15 16\n")
                              .interfaces;
  REQUIRE(interfaces.size() == 1);
  CHECK(interfaces[0].name == "eth0");
  CHECK(interfaces[0].counters[0] == 1234567890u);
  CHECK(interfaces[0].counters[8] == 9876543210u);
}

TEST_CASE("network: a damaged /proc/net/dev line is skipped and named, the others are kept") {
  const auto dev = kiwi::network::parse_net_dev(
      "  eth0: 1 2 x 4 5 6 7 8 9 10 11 12 13 14 15 16\n"
      "  eth1: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n"
      "  eth2: 1 2 3\n");
  REQUIRE(dev.interfaces.size() == 1);
  CHECK(dev.interfaces[0].name == "eth1");
  CHECK(dev.skipped == 2);
  CHECK_THAT(dev.first_skipped, Contains("eth0: 1 2 x") && Contains("'x'"));
  CHECK_THAT(kiwi::network::parse_net_dev("  eth0: 1 2 3\n").first_skipped,
             Contains("16 counters"));
}

TEST_CASE("network: link speed in Mb/s becomes bytes per second, -1 and 0 mean unknown") {
  CHECK(kiwi::network::parse_link_speed("1000\n") == 125000000.0);
  CHECK(kiwi::network::parse_link_speed("2500\n") == 312500000.0);
  CHECK(kiwi::network::parse_link_speed("100") == 12500000.0);
  CHECK_FALSE(kiwi::network::parse_link_speed("-1\n"));  // SPEED_UNKNOWN: link down, virtio
  CHECK_FALSE(kiwi::network::parse_link_speed("0\n"));
  CHECK_FALSE(kiwi::network::parse_link_speed(""));
}

TEST_CASE("network: /proc/uptime parses to exact milliseconds") {
  CHECK(kiwi::parse_uptime_ms("21572.31 162283.33\n") == 21572310);
  CHECK(kiwi::parse_uptime_ms("12.5 1.0") == 12500);
  CHECK(kiwi::parse_uptime_ms("7\n") == 7000);
  CHECK(kiwi::parse_uptime_ms("1.23456") == 1234);
  CHECK_FALSE(kiwi::parse_uptime_ms("soon"));
  CHECK_FALSE(kiwi::parse_uptime_ms("-3.00 1.00"));
  CHECK_FALSE(kiwi::parse_uptime_ms(""));
}

TEST_CASE("network: the first sample on an RK3588 has link speeds and no rates yet") {
  Harness h(fixture("rk3588"), defaults());
  kiwi::network::NetworkSensor sensor(h.context());
  const auto result = h.sample(sensor);
  CHECK(result.status == kiwi::SampleStatus::ok);
  CHECK(result.message == "first sample: rates need two readings");
  CHECK(h.sink.count("network_receive_bytes_per_second") == 0);
  CHECK(h.sink.count("network_utilisation_ratio") == 0);
  // eth0 at 1000 Mb/s; docker0's -1 (a bridge without ports) is no value; lo is excluded.
  CHECK(h.sink.label_values("network_speed_bytes_per_second", "interface") ==
        std::vector<std::string>{"eth0"});
  CHECK(h.sink.value("network_speed_bytes_per_second", {{"interface", "eth0"}}) == 125000000.0);
}

TEST_CASE("network: one second later an RK3588 shows eth0 sending at 93.75% of its gigabit link") {
  ScratchTree tree("rk3588");
  Harness h(tree.root(), defaults());
  kiwi::network::NetworkSensor sensor(h.context());
  two_samples(tree, "rk3588", sensor, h);
  const auto result = h.sample(sensor);
  CHECK(result.status == kiwi::SampleStatus::ok);
  CHECK(result.message.empty());
  const std::map<std::string, std::string> eth0{{"interface", "eth0"}};
  CHECK(h.sink.value("network_receive_bytes_per_second", eth0) == 2500000.0);
  CHECK(h.sink.value("network_transmit_bytes_per_second", eth0) == 117187500.0);
  CHECK(h.sink.value("network_receive_packets_per_second", eth0) == 30000.0);
  CHECK(h.sink.value("network_transmit_packets_per_second", eth0) == 80000.0);
  CHECK(h.sink.value("network_receive_errors_per_second", eth0) == 0.0);
  CHECK(h.sink.value("network_receive_drops_per_second", eth0) == 2.0);
  CHECK(h.sink.value("network_transmit_drops_per_second", eth0) == 0.0);
  CHECK(h.sink.value("network_utilisation_ratio", eth0) == 0.9375);
  CHECK(h.sink.find("network_transmit_bytes_per_second", eth0)->unit == "bytes_per_second");
  CHECK(h.sink.find("network_transmit_packets_per_second", eth0)->unit == "per_second");
  CHECK(h.sink.find("network_utilisation_ratio", eth0)->unit == "ratio");
  // docker0 is idle and has no known speed, so rates of 0 and no utilisation.
  CHECK(h.sink.value("network_transmit_bytes_per_second", {{"interface", "docker0"}}) == 0.0);
  CHECK_FALSE(h.sink.value("network_utilisation_ratio", {{"interface", "docker0"}}));
  CHECK(h.sink.label_values("network_receive_bytes_per_second", "interface") ==
        std::vector<std::string>{"eth0", "docker0"});
}

TEST_CASE("network: a VM's virtio NIC has rates but no speed, a veth reports 10 Gb/s") {
  ScratchTree tree("vm");
  Harness h(tree.root(), kiwi_sensor_test::with_strings(defaults(), "exclude", {"lo"}));
  kiwi::network::NetworkSensor sensor(h.context());
  two_samples(tree, "vm", sensor, h);
  h.sample(sensor);
  CHECK(h.sink.value("network_receive_bytes_per_second", {{"interface", "ens3"}}) == 1500000.0);
  CHECK(h.sink.value("network_receive_drops_per_second", {{"interface", "ens3"}}) == 1.0);
  CHECK_FALSE(h.sink.value("network_speed_bytes_per_second", {{"interface", "ens3"}}));
  CHECK_FALSE(h.sink.value("network_utilisation_ratio", {{"interface", "ens3"}}));
  CHECK(h.sink.value("network_utilisation_ratio", {{"interface", "veth3f2a1b7"}}) ==
        240000.0 / 1250000000.0);
}

TEST_CASE("network: a driver reset after resume skips that interface once, a new one waits") {
  ScratchTree tree("awkward");
  Harness h(tree.root(), defaults());
  kiwi::network::NetworkSensor sensor(h.context());
  two_samples(tree, "awkward", sensor, h);
  const auto result = h.sample(sensor);
  CHECK(result.status == kiwi::SampleStatus::ok);
  CHECK(result.message ==
        "counters went backwards (reset or wrapped), no rates this time for interface=eth0");
  CHECK(h.log.count(kiwi::LogLevel::info) == 1);
  // eth0: its speed is still known, its rates are not; usb0 just appeared: a baseline only.
  CHECK(h.sink.label_values("network_receive_bytes_per_second", "interface") ==
        std::vector<std::string>{"wlan0"});
  CHECK(h.sink.value("network_speed_bytes_per_second", {{"interface", "eth0"}}) == 125000000.0);
  CHECK_FALSE(h.sink.value("network_utilisation_ratio", {{"interface", "eth0"}}));
  // wlan0's speed file fails to read, as Wi-Fi's does (EINVAL): unknown, and no complaint.
  CHECK(h.sink.value("network_receive_bytes_per_second", {{"interface", "wlan0"}}) == 100000.0);
  CHECK_FALSE(h.sink.value("network_speed_bytes_per_second", {{"interface", "wlan0"}}));

  // The next interval measures eth0 and usb0 from their new readings.
  tree.write("proc/uptime", "21636.90 149310.80\n");
  h.sink.clear();
  CHECK(h.sample(sensor).message.empty());
  CHECK(h.sink.label_values("network_receive_bytes_per_second", "interface") ==
        std::vector<std::string>{"eth0", "wlan0", "usb0"});
  CHECK(h.sink.value("network_utilisation_ratio", {{"interface", "eth0"}}) == 0.0);
}

TEST_CASE("network: uptime that did not advance gives no rates and says so") {
  ScratchTree tree("rk3588");
  Harness h(tree.root(), defaults());
  kiwi::network::NetworkSensor sensor(h.context());
  h.sample(sensor);
  h.sink.clear();
  const auto result = h.sample(sensor);
  CHECK_THAT(result.message, Contains("uptime did not advance"));
  CHECK(h.sink.count("network_receive_bytes_per_second") == 0);
  CHECK(h.sink.count("network_speed_bytes_per_second") == 1);
}

TEST_CASE("network: containers' veth interfaces are left out by default, their bridge is kept") {
  ScratchTree tree("vm");
  Harness h(tree.root(), defaults());
  kiwi::network::NetworkSensor sensor(h.context());
  two_samples(tree, "vm", sensor, h);
  h.sample(sensor);
  CHECK(h.sink.label_values("network_receive_bytes_per_second", "interface") ==
        std::vector<std::string>{"ens3", "docker0"});
  CHECK(h.sink.label_values("network_speed_bytes_per_second", "interface") ==
        std::vector<std::string>{"docker0"});  // ens3 (virtio) has no speed
}

TEST_CASE("network: include and exclude are globs on the interface name") {
  Harness h(fixture("vm"),
            kiwi_sensor_test::with_strings(defaults(), "exclude", {"lo", "veth*", "docker*"}));
  kiwi::network::NetworkSensor sensor(h.context());
  h.sample(sensor);
  CHECK(h.sink.label_values("network_speed_bytes_per_second", "interface").empty());  // ens3: -1

  ScratchTree tree("vm");
  Harness h2(tree.root(), kiwi_sensor_test::with_strings(defaults(), "include", {"e*", "lo"}));
  kiwi::network::NetworkSensor only(h2.context());
  two_samples(tree, "vm", only, h2);
  h2.sample(only);
  // lo is included but the default exclude still wins.
  CHECK(h2.sink.label_values("network_receive_bytes_per_second", "interface") ==
        std::vector<std::string>{"ens3"});
}

TEST_CASE("network: nothing left to report is no data, a missing /proc/net/dev is an error") {
  Harness h(fixture("rk3588"), kiwi_sensor_test::with_strings(defaults(), "include", {"wg*"}));
  kiwi::network::NetworkSensor none(h.context());
  const auto result = h.sample(none);
  CHECK(result.status == kiwi::SampleStatus::no_data);
  CHECK_THAT(result.message, Contains("include and exclude"));

  ScratchTree empty;
  Harness h2(empty.root(), defaults());
  kiwi::network::NetworkSensor missing(h2.context());
  CHECK_THROWS_WITH(h2.sample(missing), Contains("proc/net/dev: not found"));
}

TEST_CASE("network: without <procfs>/uptime the counters are kept, only utilisation is missing") {
  ScratchTree tree("rk3588");
  tree.remove("proc/uptime");
  Harness h(tree.root(), defaults());
  kiwi::network::NetworkSensor sensor(h.context());
  for (int i = 0; i < 2; ++i) {
    h.sink.clear();
    const auto result = h.sample(sensor);
    CHECK(result.status == kiwi::SampleStatus::ok);
    CHECK_THAT(result.message, Contains("no utilisation: ") && Contains("uptime: not found"));
    CHECK(h.sink.count("network_receive_bytes_total") == 2);  // eth0, docker0 (lo left out)
    CHECK(h.sink.count("network_speed_bytes_per_second") == 1);
    CHECK(h.sink.count("network_utilisation_ratio") == 0);
  }
}

TEST_CASE("network: an unparseable /proc/net/dev line is skipped and named, the rest kept") {
  ScratchTree tree("rk3588");
  tree.write("proc/net/dev", read_text(fixture("rk3588/proc/net/dev")) + "  bad0: 1 2 three\n");
  Harness h(tree.root(), defaults());
  kiwi::network::NetworkSensor sensor(h.context());
  const auto result = h.sample(sensor);
  CHECK(result.status == kiwi::SampleStatus::ok);
  CHECK_THAT(result.message, Contains("skipped 1 line, the first: line") && Contains("bad0"));
  CHECK(h.sink.label_values("network_receive_bytes_total", "interface") ==
        std::vector<std::string>{"eth0", "docker0"});
}

TEST_CASE("network: traffic shaping's ifb interfaces are left out by default") {
  ScratchTree tree("rk3588");
  tree.write("proc/net/dev", read_text(fixture("rk3588/proc/net/dev")) +
                                 "  ifb4eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n");
  Harness h(tree.root(), defaults());
  kiwi::network::NetworkSensor sensor(h.context());
  h.sample(sensor);
  CHECK(h.sink.label_values("network_receive_bytes_total", "interface") ==
        std::vector<std::string>{"eth0", "docker0"});
}

TEST_CASE("network: /proc/net/wireless gives quality, signal and noise, -256 noise as none") {
  const auto w = kiwi::network::parse_net_wireless(read_text(fixture("rpi4/proc/net/wireless")));
  REQUIRE(w.size() == 1);
  CHECK(w[0].name == "wlan0");
  CHECK(w[0].quality == 54);
  CHECK(w[0].level_dbm == -56);
  CHECK_FALSE(w[0].noise_dbm);
  // Values not updated since the last read have no '.'; a measured noise is kept; a line that
  // is not an interface's is skipped.
  const auto two = kiwi::network::parse_net_wireless(
      "Inter-| sta-|   Quality\n face | tus | link level noise\n"
      "  wlp2s0: 0000   70   -30   -95        0      0      0      0      0        0\n"
      "garbage\n  wlan1: 0000   x. -40. -256 0 0 0 0 0 0\n");
  REQUIRE(two.size() == 1);
  CHECK(two[0].quality == 70);
  CHECK(two[0].noise_dbm == -95);
  CHECK(kiwi::network::parse_net_wireless("").empty());
}

TEST_CASE("network: a Raspberry Pi's Wi-Fi levels, and none where there is no wireless file") {
  Harness pi(fixture("rpi4"), defaults());
  kiwi::network::NetworkSensor sensor(pi.context());
  CHECK(pi.sample(sensor).status == kiwi::SampleStatus::ok);
  CHECK(pi.sink.value("network_wireless_quality", {{"interface", "wlan0"}}) == 54);
  CHECK(pi.sink.value("network_wireless_signal_dbm", {{"interface", "wlan0"}}) == -56);
  CHECK(pi.sink.count("network_wireless_noise_dbm") == 0);
  Harness vm(fixture("vm"), defaults());
  kiwi::network::NetworkSensor wired(vm.context());
  CHECK(vm.sample(wired).message.find("Wi-Fi") == std::string::npos);
  CHECK(vm.sink.count("network_wireless_quality") == 0);
  // An unreadable table is a note; the counters stand.
  ScratchTree tree("x86");
  tree.make_unreadable("proc/net/wireless");
  Harness x86(tree.root(), defaults());
  kiwi::network::NetworkSensor broken(x86.context());
  CHECK_THAT(x86.sample(broken).message, Contains("no Wi-Fi levels"));
  CHECK(x86.sink.count("network_receive_bytes_total") > 0);
}
