// Billing end to end: the gpuaas binary, its CLI and its API. A rate card, a pool requested by a
// member, approved by an operator and released a few seconds later; the invoice bills the seconds
// held at the card's prices under the stated rounding, the FOCUS export carries the same amounts,
// budgets refuse and alert, and tenancy holds.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "common/clock.h"
#include "process.h"

namespace gpuaas::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kOperator = "operator-token-0123456789";
constexpr const char* kMember = "member-token-0123456789ab";
constexpr const char* kOther = "other-member-token-0123456";

// seconds x quantity x unit price / 3600, rounded half away from zero (docs/billing.md).
int64_t Amount(int64_t seconds, int64_t quantity, int64_t unit) {
  const __int128 n = static_cast<__int128>(seconds) * quantity * unit;
  return static_cast<int64_t>((n + 1800) / 3600);
}

std::string Decimal(int64_t micros) {
  const bool neg = micros < 0;
  const uint64_t m = neg ? 0ULL - static_cast<uint64_t>(micros) : static_cast<uint64_t>(micros);
  return (neg ? "-" : "") + std::to_string(m / 1000000) + "." + [&] {
    std::string f = std::to_string(m % 1000000);
    return std::string(6 - f.size(), '0') + f;
  }();
}

std::vector<std::string> CsvFields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

class BillingE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuaas-bill-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::ofstream(dir_ + "/tokens") << kOperator << ",ops,operator\n"
                                    << kMember << ",alice,member,vision\n"
                                    << kOther << ",bob,member,other\n";
    std::ofstream(dir_ + "/fleet.yaml") << R"(clusters:
  - name: lab
    nodePools:
      - {name: h200, count: 2, model: H200-SXM-141GB, gpusPerNode: 4, migNodes: 1, migLayouts: ["3g.71gb@0 3g.71gb@4"]}
)";
    setenv("GPUAAS_TOKEN", kOperator, 1);
    ASSERT_TRUE(server_.Start("--token-auth-file " + dir_ + "/tokens --fleet " + dir_ + "/fleet.yaml --db sqlite:" +
                                  dir_ + "/g.db",
                              dir_ + "/server.log"))
        << server_.Log();
    setenv("GPUAAS_SERVER", server_.Url().c_str(), 1);
    client_ = std::make_unique<httplib::Client>(server_.Url());
    client_->set_read_timeout(30);
  }
  void TearDown() override {
    unsetenv("GPUAAS_SERVER");
    fs::remove_all(dir_);
  }
  httplib::Result Get(const std::string& path, const char* token = kOperator) {
    return client_->Get(path, {{"Authorization", std::string("Bearer ") + token}});
  }
  RunResult As(const char* token, const std::string& args) {
    setenv("GPUAAS_TOKEN", token, 1);
    RunResult r = RunGpuaas(args);
    setenv("GPUAAS_TOKEN", kOperator, 1);
    return r;
  }
  std::string dir_;
  ServerProcess server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(BillingE2eTest, ApprovedSecondsAreInvoicedAtTheCardsPricesAndExportedAsFocus) {
  RunResult card = RunGpuaas("bill ratecard list --price H200-SXM-141GB/full=3.60");
  ASSERT_EQ(card.code, 0) << card.out;
  RunResult cards = RunGpuaas("get ratecards");
  EXPECT_NE(cards.out.find("H200-SXM-141GB/full=3.600000"), std::string::npos) << cards.out;
  ASSERT_EQ(RunGpuaas("project create vision").code, 0);
  ASSERT_EQ(RunGpuaas("project create other").code, 0);

  // The member asks, the operator approves, the member releases a few seconds later.
  RunResult req = As(kMember, "pool request train -p vision --item H200-SXM-141GB/full=2 --item H200-SXM-141GB/3g.71gb=1");
  ASSERT_EQ(req.code, 0) << req.out;
  ASSERT_EQ(RunGpuaas("pool approve train -p vision --reason e2e").code, 0);
  // Released once the meter has run for a second at least (so that every line has an amount).
  ASSERT_TRUE(Eventually(
      [&] {
        auto meters = Get("/apis/gpuaas.io/v1/namespaces/vision/usagerecords", kMember);
        if (!meters || meters->status != 200) return false;
        const json items = json::parse(meters->body)["items"];
        if (items.empty()) return false;
        const std::optional<Time> start = ParseTime(items[0]["spec"]["start"].get<std::string>());
        return start && std::chrono::system_clock::now() - *start >= std::chrono::seconds(1);
      },
      std::chrono::seconds(10)))
      << "no meter opened";
  ASSERT_EQ(As(kMember, "pool release train -p vision").code, 0);

  // The pool controller ends the meter at the request's time, once it sees the request.
  json m;
  ASSERT_TRUE(Eventually(
      [&] {
        auto meters = Get("/apis/gpuaas.io/v1/namespaces/vision/usagerecords", kMember);
        if (!meters || meters->status != 200) return false;
        const json items = json::parse(meters->body)["items"];
        if (items.empty() || !items[0]["spec"].contains("end")) return false;
        m = items[0];
        return true;
      },
      std::chrono::seconds(10)))
      << "the meter did not end";
  const Time start = *ParseTime(m["spec"]["start"].get<std::string>());
  const Time end = *ParseTime(m["spec"]["end"].get<std::string>());
  const int64_t held = std::chrono::duration_cast<std::chrono::seconds>(end - start).count();
  EXPECT_GE(held, 1);
  EXPECT_LE(held, 10);

  // The invoice of the running month, as the member sees it.
  auto r = Get("/api/v1/projects/vision/invoices", kMember);
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "");
  const json list = json::parse(r->body);
  ASSERT_EQ(list["items"].size(), 1u) << list.dump(2);
  const json inv = list["items"][0];
  EXPECT_EQ(inv["state"], "draft");
  EXPECT_EQ(inv["currency"], "USD");
  EXPECT_EQ(inv["period"]["name"], FormatTime(start).substr(0, 7));
  ASSERT_EQ(inv["lines"].size(), 2u) << inv.dump(2);
  int64_t total = 0;
  for (const json& l : inv["lines"]) {
    const bool full = l["item"] == "H200-SXM-141GB/full";
    EXPECT_EQ(l["pool"], "train");
    EXPECT_EQ(l["seconds"], held) << l.dump();
    EXPECT_EQ(l["quantity"], full ? 2 : 1);
    // 3g.71gb: 3 of the H200's 7 compute slices of 3.60 an hour, rounded to a micro-unit.
    EXPECT_EQ(l["unitPriceMicros"], full ? 3'600'000 : 1'542'857) << l.dump();
    EXPECT_EQ(l["amountMicros"], Amount(held, l["quantity"], l["unitPriceMicros"])) << l.dump();
    total += l["amountMicros"].get<int64_t>();
  }
  EXPECT_EQ(inv["totalMicros"], total);

  // The CLI shows the same invoice; the CSV lines carry the same figures.
  RunResult show = As(kMember, "bill show vision");
  ASSERT_EQ(show.code, 0) << show.out;
  EXPECT_NE(show.out.find("Total: " + Decimal(total) + " USD"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("H200-SXM-141GB/3g.71gb"), std::string::npos) << show.out;
  RunResult list_cli = As(kMember, "bill list");
  ASSERT_EQ(list_cli.code, 0) << list_cli.out;
  EXPECT_NE(list_cli.out.find("vision    " + FormatTime(start).substr(0, 7) + "   draft"), std::string::npos)
      << list_cli.out;
  RunResult csv = As(kMember, "bill export vision --format csv");
  ASSERT_EQ(csv.code, 0) << csv.out;
  EXPECT_NE(csv.out.find(",train,H200-SXM-141GB/full,Usage,2," + std::to_string(held) + ",3600000,"), std::string::npos)
      << csv.out;

  // FOCUS 1.2 of the same month: one row a line, the same amounts, the documented columns.
  RunResult focus = RunGpuaas("bill export --focus --from " + FormatTime(start).substr(0, 7));
  ASSERT_EQ(focus.code, 0) << focus.out;
  std::istringstream rows(focus.out);
  std::string header_line;
  std::getline(rows, header_line);
  const std::vector<std::string> header = CsvFields(header_line);
  std::ifstream doc("docs/billing/focus-1.2-columns.txt");
  std::vector<std::string> documented;
  for (std::string line; std::getline(doc, line);) {
    if (!line.empty() && line[0] != '#') documented.push_back(line);
  }
  EXPECT_EQ(header, documented);
  const auto col = [&](const std::string& name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  int64_t focus_total = 0;
  int focus_rows = 0;
  for (std::string line; std::getline(rows, line);) {
    if (line.empty()) continue;
    const std::vector<std::string> f = CsvFields(line);
    ASSERT_EQ(f.size(), header.size()) << line;
    EXPECT_EQ(f[col("SubAccountId")], "vision");
    EXPECT_EQ(f[col("BillingCurrency")], "USD");
    EXPECT_EQ(f[col("ChargeCategory")], "Usage");
    EXPECT_EQ(f[col("BilledCost")], f[col("EffectiveCost")]);
    EXPECT_EQ(f[col("BilledCost")], f[col("ListCost")]);
    bool matched = false;
    for (const json& l : inv["lines"]) {
      if (f[col("SkuId")] == l["item"]) {
        EXPECT_EQ(f[col("BilledCost")], Decimal(l["amountMicros"].get<int64_t>()));
        matched = true;
      }
    }
    EXPECT_TRUE(matched) << line;
    const std::string cost = f[col("BilledCost")];
    focus_total += std::stoll(cost.substr(0, cost.find('.'))) * 1000000 + std::stoll(cost.substr(cost.find('.') + 1));
    ++focus_rows;
  }
  EXPECT_EQ(focus_rows, 2);
  EXPECT_EQ(focus_total, total);

  // Tenancy: another project's member sees nothing of vision's bill; exports are for operators.
  auto other = Get("/api/v1/projects/vision/invoices", kOther);
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
  auto export_member = Get("/api/v1/billing/focus", kMember);
  ASSERT_TRUE(export_member);
  EXPECT_EQ(export_member->status, 403);
  auto summary = Get("/api/v1/billing/summary");
  ASSERT_TRUE(summary && summary->status == 200);
  EXPECT_EQ(json::parse(summary->body)["amountMicros"], total);
  EXPECT_EQ(json::parse(summary->body)["byCluster"][0]["cluster"], "lab");
}

TEST_F(BillingE2eTest, BudgetsRefuseWithTheFiguresAndRaiseAlerts) {
  ASSERT_EQ(RunGpuaas("bill ratecard list --price H200-SXM-141GB/full=3.60").code, 0);
  ASSERT_EQ(RunGpuaas("project create vision").code, 0);
  ASSERT_EQ(As(kMember, "pool request a -p vision --item H200-SXM-141GB/full=1").code, 0);
  ASSERT_EQ(RunGpuaas("pool approve a -p vision").code, 0);
  // Once the running pool has cost more than the budget below (0.0005 USD: half a second of
  // one GPU at 3.60 an hour) ...
  ASSERT_TRUE(Eventually(
      [&] {
        auto r = Get("/api/v1/projects/vision/invoices");
        if (!r || r->status != 200) return false;
        const json items = json::parse(r->body)["items"];
        return !items.empty() && items[0]["totalMicros"].get<int64_t>() > 500;
      },
      std::chrono::seconds(10)))
      << "the pool was not billed";
  // ... a budget smaller than what it has already cost: at 100%, and nothing new fits.
  RunResult budget = RunGpuaas("bill budget vision --amount 0.000500");
  ASSERT_EQ(budget.code, 0) << budget.out;
  RunResult refused = As(kMember, "pool request b -p vision --item H200-SXM-141GB/full=1");
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.out.find("Error from server (BudgetExceeded): project vision budget for"), std::string::npos)
      << refused.out;
  EXPECT_NE(refused.out.find("is 0.000500 USD"), std::string::npos) << refused.out;
  auto alerts = Get("/api/v1/alerts?active=true");
  ASSERT_TRUE(alerts && alerts->status == 200);
  const json items = json::parse(alerts->body)["items"];
  ASSERT_EQ(items.size(), 1u) << items.dump(2);
  EXPECT_EQ(items[0]["source"], "Budget");
  EXPECT_EQ(items[0]["reason"], "BudgetExceeded");
  EXPECT_EQ(items[0]["project"], "vision");
  RunResult cli_alerts = RunGpuaas("alerts");
  EXPECT_NE(cli_alerts.out.find("project/vision"), std::string::npos) << cli_alerts.out;
  // Overruns allowed: the pool goes through, the alert stays.
  ASSERT_EQ(RunGpuaas("bill budget vision --amount 0.000500 --allow-overrun").code, 0);
  EXPECT_EQ(As(kMember, "pool request b -p vision --item H200-SXM-141GB/full=1").code, 0);
  // Bad input is refused with the reason and changes nothing.
  auto bad_period = Get("/api/v1/projects/vision/invoices?period=2026-13");
  ASSERT_TRUE(bad_period);
  EXPECT_EQ(bad_period->status, 400);
  EXPECT_NE(bad_period->body.find("YYYY-MM"), std::string::npos);
  RunResult bad_card = RunGpuaas("bill ratecard euro --currency eur --price H200-SXM-141GB/full=1");
  EXPECT_EQ(bad_card.code, 1);
  EXPECT_NE(bad_card.out.find("ISO 4217"), std::string::npos) << bad_card.out;
  RunResult bad_amount = RunGpuaas("bill budget vision --amount 1.2345678");
  EXPECT_EQ(bad_amount.code, 1);
  EXPECT_NE(bad_amount.out.find("six decimals"), std::string::npos) << bad_amount.out;
  auto negative = client_->Put("/apis/gpuaas.io/v1/projects/vision/budget", {{"Authorization", std::string("Bearer ") + kOperator}},
                               R"({"amountMicros":-5})", "application/json");
  ASSERT_TRUE(negative);
  EXPECT_EQ(negative->status, 400);
}

}  // namespace
}  // namespace gpuaas::testing
