// `gpuaas catalog layouts MODEL` against an independent enumeration. The oracle here walks the
// memory slices left to right (each slice is left empty or starts an instance), a different
// search from the catalogue's, and applies the MIG rules itself.
#include <map>
#include <set>

#include "catalog/catalog.h"
#include "gtest/gtest.h"
#include "process.h"

namespace gpuaas::testing {
namespace {

struct Placed {
  const catalog::MigProfile* p;
  int start;
};

bool Legal(const catalog::GpuModel& m, const std::vector<Placed>& l) {
  int compute = 0, media = 0;
  std::vector<int> used(m.memory_slices, 0);
  std::map<const catalog::MigProfile*, int> count;
  for (const Placed& x : l) {
    bool start_ok = false;
    for (int s : x.p->starts) start_ok |= s == x.start;
    if (!start_ok) return false;
    for (int i = x.start; i < x.start + x.p->memory_slices; ++i) {
      if (i >= m.memory_slices || used[i]++) return false;
    }
    compute += x.p->compute_slices;
    media += std::string_view(x.p->name).find("+me") != std::string_view::npos;
    if (++count[x.p] > x.p->max_count) return false;
  }
  return compute <= m.compute_slices && media <= 1;
}

void Walk(const catalog::GpuModel& m, int slot, std::vector<Placed>& cur,
          std::vector<std::vector<Placed>>& out) {
  if (slot >= m.memory_slices) {
    if (!cur.empty() && Legal(m, cur)) out.push_back(cur);
    return;
  }
  Walk(m, slot + 1, cur, out);
  for (const catalog::MigProfile& p : m.profiles) {
    cur.push_back({&p, slot});
    if (Legal(m, cur)) Walk(m, slot + p.memory_slices, cur, out);
    cur.pop_back();
  }
}

std::string Format(std::vector<Placed> l) {
  std::sort(l.begin(), l.end(), [](const Placed& a, const Placed& b) {
    return a.start != b.start ? a.start < b.start : a.p->name < b.p->name;
  });
  std::string s;
  for (const Placed& x : l) s += (s.empty() ? "" : " ") + std::string(x.p->name) + "@" + std::to_string(x.start);
  return s;
}

TEST(CatalogLayoutsCommand, PrintsEveryMaximalLegalLayout) {
  for (const catalog::GpuModel& m : catalog::AllModels()) {
    if (!m.mig_capable) continue;
    SCOPED_TRACE(std::string(m.name));
    std::vector<std::vector<Placed>> all;
    std::vector<Placed> cur;
    Walk(m, 0, cur, all);
    std::set<std::string> want;
    for (const auto& l : all) {
      bool maximal = true;
      for (const catalog::MigProfile& p : m.profiles) {
        for (int s : p.starts) {
          std::vector<Placed> more = l;
          more.push_back({&p, s});
          if (Legal(m, more)) maximal = false;
        }
      }
      if (maximal) want.insert(Format(l));
    }
    RunResult r = RunGpuaas("catalog layouts " + std::string(m.name));
    ASSERT_EQ(r.code, 0) << r.out;
    std::vector<std::string> lines = Lines(r.out);
    EXPECT_TRUE(std::is_sorted(lines.begin(), lines.end()));
    EXPECT_EQ(std::set<std::string>(lines.begin(), lines.end()), want);
    EXPECT_EQ(lines.size(), want.size());
  }
  RunResult full_only = RunGpuaas("catalog layouts L40S-48GB");
  EXPECT_EQ(full_only.code, 1);
  EXPECT_NE(full_only.out.find("does not support MIG"), std::string::npos);
  RunResult unknown = RunGpuaas("catalog layouts Z100");
  EXPECT_EQ(unknown.code, 1);
  EXPECT_NE(unknown.out.find("catalog models"), std::string::npos);
}

}  // namespace
}  // namespace gpuaas::testing
