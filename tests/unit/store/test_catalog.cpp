// The series catalog (store/catalog.hpp, store/series_table.hpp): ids that stay with their series.
#include <catch2/catch.hpp>
#include <cmath>

#include "store/series_table.hpp"
#include "store_test_support.hpp"

using namespace kiwi::agent;
using namespace store_test;

TEST_CASE("store: series that change places, labels or order between ticks keep their own ids") {
  // Each tick's series are first looked for where they were the tick before; none may take the
  // id of the one that was there.
  TempDb db;
  Store store(db.path());
  append(store, 1000, {metric("a", 1, ""), metric("b", 2, ""), metric("c", 3, "", {{"x", "1"}})});
  append(store, 2000,
         {metric("b", 20, ""), metric("a", 10, ""), metric("c", 30, "", {{"x", "2"}})});
  append(store, 3000,
         {metric("a", 100, ""), metric("c", 300, "", {{"x", "1"}}),
          metric("c", 301, "", {{"x", "1"}, {"y", "1"}})});
  append(store, 4000, {metric("a", 1000, "")});
  auto r = store.query({});
  REQUIRE(r.timestamps.size() == 4);
  auto values = [&](const std::string& key) {
    auto* s = find(r, key);
    REQUIRE(s);
    std::vector<std::string> out;
    for (double v : s->values) out.push_back(std::isnan(v) ? "-" : std::to_string(int(v)));
    return out;
  };
  using V = std::vector<std::string>;
  CHECK(values("a") == V{"1", "10", "100", "1000"});
  CHECK(values("b") == V{"2", "20", "-", "-"});
  CHECK(values("c{x=\"1\"}") == V{"3", "-", "300", "-"});
  CHECK(values("c{x=\"2\"}") == V{"-", "30", "-", "-"});
  CHECK(values("c{x=\"1\",y=\"1\"}") == V{"-", "-", "301", "-"});
  CHECK(r.series.size() == 5);
}

TEST_CASE("store: the catalog lists every series once, in id order, across chunks and reopens") {
  TempDb db;
  const std::size_t n = 3 * SeriesCatalog::kChunk + 7;
  std::vector<kiwi::MetricValue> ms;
  for (std::size_t i = 0; i < n; ++i)
    ms.push_back(metric("s", static_cast<double>(i), "", {{"i", std::to_string(i)}}));
  Store::Catalog early;
  {
    Store store(db.path());
    append(store, 1000, {ms[0]});
    early = store.series();
    append(store, 2000, ms);
    append(store, 3000, ms);  // known series: no new entries
    auto c = store.series();
    REQUIRE(c->size() == n);
    std::size_t i = 0;
    for (auto& s : *c) CHECK(s.key == "s{i=\"" + std::to_string(i++) + "\"}");
    CHECK(early->size() == 1);  // a view taken before stays as it was
    CHECK((*early)[0].key == "s{i=\"0\"}");
  }
  Store again(db.path());
  auto c = again.series();
  REQUIRE(c->size() == n);
  CHECK((*c)[n - 1].key == "s{i=\"" + std::to_string(n - 1) + "\"}");
  CHECK((*c)[SeriesCatalog::kChunk].labels[0].second == std::to_string(SeriesCatalog::kChunk));
}

TEST_CASE("store: carried catalog rows continue a table and nothing else") {
  SeriesTable from, to;
  std::vector<kiwi::MetricValue> ms{metric("a", 1, "celsius", {{"zone", "cpu \"0\"\n"}}),
                                    metric("b", 2, "")};
  ms[1].kind = kiwi::MetricKind::counter;
  std::vector<const kiwi::MetricValue*> ptrs{&ms[0], &ms[1]};
  std::vector<std::pair<std::uint32_t, double>> values;
  from.ids(ptrs, values);
  const std::string all = from.carry(0), second = from.carry(1);
  CHECK(to.adopt(second) == 0);  // would leave a gap (id 1): refused
  CHECK(to.size() == 0);
  CHECK(to.adopt(all.substr(0, all.size() - 1)) == 0);  // cut short
  CHECK(to.adopt(all + "x") == 0);                      // bytes after the rows
  CHECK(to.adopt(all) == 2);
  CHECK(to.adopt(second) == 0);  // has them already
  auto view = to.view();
  REQUIRE(view->size() == 2);
  CHECK((*view)[0].key == "a{zone=\"cpu \\\"0\\\"\\n\"}");
  CHECK((*view)[0].labels == ms[0].labels);
  CHECK((*view)[0].unit == "celsius");
  CHECK((*view)[1].key == "b");
  CHECK((*view)[1].kind == kiwi::MetricKind::counter);
  values.clear();
  to.ids(ptrs, values);  // the same ids, not new ones
  CHECK(values == std::vector<std::pair<std::uint32_t, double>>{{1, 1}, {2, 2}});
  CHECK(to.size() == 2);
}
