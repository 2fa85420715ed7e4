// Lending end to end, through the API of a real server on a simulated fleet and the real clock:
// a pool lends its idle GPUs, another project's preemptible workload borrows one, the owner's
// work takes it back within the grace plus 5 s, and both invoices carry the loan to the second.
#include <ctime>
#include <filesystem>
#include <fstream>

#include "common/clock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "process.h"

namespace gpuaas::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kJson = "application/json";

std::string MonthStart(std::string* period) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m", &tm);
  *period = buf;
  std::strftime(buf, sizeof buf, "%Y-%m-01T00:00:00Z", &tm);
  return buf;
}

class LendingE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuaas-lend-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::ofstream(dir_ + "/fleet.yaml") << R"(clusters:
  - name: lab
    nodePools:
      - {name: h200, count: 1, model: H200-SXM-141GB, gpusPerNode: 2}
)";
    ASSERT_TRUE(server_.Start("--insecure-no-auth --fleet " + dir_ + "/fleet.yaml --db sqlite:" + dir_ + "/g.db",
                              dir_ + "/server.log"))
        << server_.Log();
    client_ = std::make_unique<httplib::Client>(server_.Url());
    client_->set_read_timeout(30);
  }
  void TearDown() override { fs::remove_all(dir_); }

  json GetJson(const std::string& path) {
    auto r = client_->Get(path);
    if (!r || r->status != 200) return json();
    return json::parse(r->body);
  }
  int Post(const std::string& path, const json& body, std::string* out = nullptr) {
    auto r = client_->Post(path, body.dump(), kJson);
    if (out != nullptr && r) *out = r->body;
    return r ? r->status : 0;
  }
  json Workload(const std::string& ns, const std::string& name) {
    return GetJson("/apis/gpuaas.io/v1/namespaces/" + ns + "/workloads/" + name);
  }

  // A rate card from the month's start (an H200 at 3.6 USD/h, preemptible at 50%), projects
  // vision and nlp, and vision's pool train of both GPUs, approved, lending them at once with a
  // 2 s grace. The month's name in `period`.
  void LendingPool(std::string* period) {
    const std::string from = MonthStart(period);
    ASSERT_EQ(Post("/apis/gpuaas.io/v1/ratecards",
                   {{"apiVersion", "gpuaas.io/v1"}, {"kind", "RateCard"}, {"metadata", {{"name", "list"}}},
                    {"spec",
                     {{"currency", "USD"}, {"effectiveFrom", from},
                      {"prices", {{{"model", "H200-SXM-141GB"}, {"profile", "full"}, {"pricePerHourMicros", 3600000}}}},
                      {"preemptiblePricePercent", 50}}}}),
              201);
    for (const char* p : {"vision", "nlp"}) {
      ASSERT_EQ(Post("/apis/gpuaas.io/v1/projects",
                     {{"apiVersion", "gpuaas.io/v1"}, {"kind", "Project"}, {"metadata", {{"name", p}}}}),
                201);
    }
    std::string body;
    ASSERT_EQ(Post("/apis/gpuaas.io/v1/namespaces/vision/gpupools",
                   {{"apiVersion", "gpuaas.io/v1"}, {"kind", "GpuPool"}, {"metadata", {{"name", "train"}}},
                    {"spec",
                     {{"items", {{{"model", "H200-SXM-141GB"}, {"profile", "full"}, {"count", 2}}}},
                      {"lending", {{"enabled", true}, {"idleAfterSeconds", 0}, {"reclaimGraceSeconds", 2}}}}}},
                   &body),
              201)
        << body;
    auto approve = client_->Put("/apis/gpuaas.io/v1/namespaces/vision/gpupools/train/approval",
                                R"({"approve":true,"reason":"e2e"})", kJson);
    ASSERT_TRUE(approve && approve->status == 200) << (approve ? approve->body : "no answer");
  }

  std::string dir_;
  ServerProcess server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(LendingE2eTest, ABorrowerRunsOnAnIdleGpuIsReclaimedWithinTheGraceAndBothInvoicesShowTheLoan) {
  std::string period;
  ASSERT_NO_FATAL_FAILURE(LendingPool(&period));
  std::string body;

  // A grace past the operator's cap is refused, and the pool is unchanged.
  auto too_long = client_->Patch("/apis/gpuaas.io/v1/namespaces/vision/gpupools/train",
                                 R"({"spec":{"lending":{"enabled":true,"reclaimGraceSeconds":3600}}})",
                                 "application/merge-patch+json");
  ASSERT_TRUE(too_long);
  EXPECT_EQ(too_long->status, 400) << too_long->body;
  EXPECT_NE(too_long->body.find("reclaimGraceSeconds"), std::string::npos) << too_long->body;
  EXPECT_EQ(GetJson("/apis/gpuaas.io/v1/namespaces/vision/gpupools/train")["spec"]["lending"]["reclaimGraceSeconds"], 2);

  // nlp borrows one GPU: a preemptible workload that names no pool.
  ASSERT_EQ(Post("/apis/gpuaas.io/v1/namespaces/nlp/workloads",
                 {{"apiVersion", "gpuaas.io/v1"}, {"kind", "Workload"}, {"metadata", {{"name", "sweep"}}},
                  {"spec", {{"resources", {{"nvidia.com/gpu", 1}}}, {"priorityClassName", "preemptible"}}}},
                 &body),
            201)
      << body;
  ASSERT_TRUE(Eventually([&] { return Workload("nlp", "sweep")["status"].value("phase", "") == "Running"; },
                         std::chrono::seconds(30)))
      << Workload("nlp", "sweep").dump() << "\n" << server_.Log();
  json sweep = Workload("nlp", "sweep");
  EXPECT_EQ(sweep["status"]["reason"], "Borrowed");
  EXPECT_EQ(sweep["status"]["borrowedFrom"], json({{"project", "vision"}, {"pool", "train"}}));
  const std::string lent_gpu = sweep["status"]["devices"][0]["gpuUUID"];

  std::this_thread::sleep_for(std::chrono::seconds(2));  // a loan of a few seconds, to be billed

  // The owner needs both GPUs: the borrower is told, and the owner runs within grace + 5 s.
  const auto submitted = std::chrono::steady_clock::now();
  ASSERT_EQ(Post("/apis/gpuaas.io/v1/namespaces/vision/workloads",
                 {{"apiVersion", "gpuaas.io/v1"}, {"kind", "Workload"}, {"metadata", {{"name", "big"}}},
                  {"spec", {{"pool", "train"}, {"resources", {{"nvidia.com/gpu", 2}}}}}}),
            201);
  ASSERT_TRUE(Eventually([&] { return Workload("nlp", "sweep")["status"].contains("reclaimDeadline"); },
                         std::chrono::seconds(10)))
      << Workload("nlp", "sweep").dump();
  EXPECT_EQ(Workload("nlp", "sweep")["status"]["reason"], "Reclaimed");
  EXPECT_EQ(Workload("vision", "big")["status"]["reason"], "Reclaiming") << Workload("vision", "big").dump();
  ASSERT_TRUE(Eventually([&] { return Workload("vision", "big")["status"].value("phase", "") == "Running"; },
                         std::chrono::seconds(20)))
      << Workload("vision", "big").dump();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - submitted).count();
  EXPECT_LE(took, 2 + 5) << "the owner waited past the grace plus 5 s";
  EXPECT_GE(took, 1.5) << "the borrower was not given its grace";
  // The borrower queues again (it did not ask to end), saying why.
  sweep = Workload("nlp", "sweep");
  EXPECT_EQ(sweep["status"]["phase"], "Pending") << sweep.dump();
  EXPECT_EQ(sweep["status"]["reason"], "Reclaimed");
  EXPECT_FALSE(sweep["status"].contains("borrowedFrom"));

  // The receipt, and both invoices to the second: 50% of 3.60 an hour for each second of it.
  json loans = GetJson("/apis/gpuaas.io/v1/loans");
  ASSERT_EQ(loans["items"].size(), 1u) << loans.dump();
  const json& loan = loans["items"][0]["spec"];
  EXPECT_EQ(loan["borrower"], "nlp");
  EXPECT_EQ(loan["lender"], "vision");
  EXPECT_EQ(loan["devices"][0]["gpuUUID"], lent_gpu);
  EXPECT_EQ(loan["endReason"], "Reclaimed");
  const int64_t seconds =
      (*ParseTime(loan["end"].get<std::string>()) - *ParseTime(loan["start"].get<std::string>())) / std::chrono::seconds(1);
  ASSERT_GE(seconds, 3);
  const int64_t amount = (seconds * 1800000 + 1800) / 3600;
  auto line_of = [&](const std::string& project, const std::string& kind) {
    json inv = GetJson("/api/v1/projects/" + project + "/invoices/" + period);
    for (const json& l : inv.value("lines", json::array())) {
      if (l.value("loan", "") == kind) return l;
    }
    ADD_FAILURE() << project << " has no " << kind << " line: " << inv.dump();
    return json();
  };
  const json borrowed = line_of("nlp", "borrowed");
  const json lent = line_of("vision", "lent");
  EXPECT_EQ(borrowed["seconds"], seconds);
  EXPECT_EQ(lent["seconds"], seconds);
  EXPECT_EQ(borrowed["unitPriceMicros"], 1800000);
  EXPECT_EQ(borrowed["amountMicros"], amount);
  EXPECT_EQ(lent["amountMicros"], -amount);
  EXPECT_EQ(borrowed["category"], "Usage");
  EXPECT_EQ(lent["category"], "Credit");
  // The FOCUS export carries the lender's credit as a Credit row.
  auto focus = client_->Get("/api/v1/billing/focus?period=" + period);
  ASSERT_TRUE(focus && focus->status == 200);
  EXPECT_NE(focus->body.find("lent to project nlp"), std::string::npos) << focus->body;
  EXPECT_EQ(server_.Stop(), 0);
}

TEST_F(LendingE2eTest, AReservationLendsUntilItsStartIsReadyWithinFiveSecondsBilledFromItsStartAndReleasedAtItsEnd) {
  for (const char* p : {"vision", "nlp"}) {
    ASSERT_EQ(Post("/apis/gpuaas.io/v1/projects",
                   {{"apiVersion", "gpuaas.io/v1"}, {"kind", "Project"}, {"metadata", {{"name", p}}}}),
              201);
  }
  const Time now = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
  const Time start = now + std::chrono::seconds(10);
  const Time end = start + std::chrono::seconds(8);
  auto pool_body = [&](const std::string& name, int count, Time from, Time to) {
    return json{{"apiVersion", "gpuaas.io/v1"}, {"kind", "GpuPool"}, {"metadata", {{"name", name}}},
                {"spec",
                 {{"items", {{{"model", "H200-SXM-141GB"}, {"profile", "full"}, {"count", count}}}},
                  {"startTime", FormatTime(from)}, {"endTime", FormatTime(to)}, {"lending", {{"reclaimGraceSeconds", 2},
                  {"enabled", false}}}}}};
  };
  // A window that has passed, and one larger than the fleet has free, are refused at once.
  std::string body;
  EXPECT_EQ(Post("/apis/gpuaas.io/v1/namespaces/vision/gpupools",
                 pool_body("late", 1, now - std::chrono::hours(1), now + std::chrono::hours(1)), &body),
            400);
  EXPECT_NE(body.find("has passed"), std::string::npos) << body;
  ASSERT_EQ(Post("/apis/gpuaas.io/v1/namespaces/vision/gpupools", pool_body("window", 2, start, end), &body), 201)
      << body;
  auto approve = client_->Put("/apis/gpuaas.io/v1/namespaces/vision/gpupools/window/approval",
                              R"({"approve":true,"reason":"e2e"})", kJson);
  ASSERT_TRUE(approve && approve->status == 200) << (approve ? approve->body : "no answer");
  EXPECT_NE(Post("/apis/gpuaas.io/v1/namespaces/nlp/gpupools", pool_body("more", 1, start, end), &body), 201);
  EXPECT_NE(body.find("cannot be held"), std::string::npos) << body;

  auto ready = [&] {
    json p = GetJson("/apis/gpuaas.io/v1/namespaces/vision/gpupools/window");
    for (const json& c : p["status"].value("conditions", json::array())) {
      if (c["type"] == "Ready") return c;
    }
    return json();
  };
  // Before its start the pool is reserved, not Ready, and lends its GPUs.
  ASSERT_TRUE(Eventually([&] { return ready().value("reason", "") == "Reserved"; }, std::chrono::seconds(8)))
      << ready().dump();
  ASSERT_EQ(Post("/apis/gpuaas.io/v1/namespaces/nlp/workloads",
                 {{"apiVersion", "gpuaas.io/v1"}, {"kind", "Workload"}, {"metadata", {{"name", "early"}}},
                  {"spec", {{"resources", {{"nvidia.com/gpu", 1}}}, {"priorityClassName", "preemptible"}}}}),
            201);
  ASSERT_TRUE(Eventually([&] { return Workload("nlp", "early")["status"].value("phase", "") == "Running"; },
                         std::chrono::seconds(8)))
      << Workload("nlp", "early").dump();
  EXPECT_EQ(Workload("nlp", "early")["status"]["borrowedFrom"]["pool"], "window");

  // Ready within 5 s of its start, with the borrower gone from its GPU by then.
  ASSERT_TRUE(Eventually([&] { return ready().value("status", "") == "True"; }, std::chrono::seconds(30)))
      << ready().dump();
  const Time ready_at = std::chrono::system_clock::now();
  EXPECT_GE(ready_at, start);
  EXPECT_LE(ready_at, start + std::chrono::seconds(5));
  json early = Workload("nlp", "early");
  EXPECT_NE(early["status"]["phase"], "Running") << early.dump();
  EXPECT_EQ(early["status"]["reason"], "Reclaimed") << early.dump();
  // Billed from its start, not from the approval.
  json meter = GetJson("/apis/gpuaas.io/v1/namespaces/vision/usagerecords/window");
  EXPECT_EQ(meter["spec"]["start"], FormatTime(start)) << meter.dump();

  // Released at its end.
  auto released = [&] {
    json p = GetJson("/apis/gpuaas.io/v1/namespaces/vision/gpupools/window");
    for (const json& c : p["status"].value("conditions", json::array())) {
      if (c["type"] == "Released") return c.value("status", "") == "True";
    }
    return false;
  };
  ASSERT_TRUE(Eventually(released, std::chrono::seconds(30))) << GetJson("/apis/gpuaas.io/v1/namespaces/vision/gpupools/window").dump();
  EXPECT_LE(std::chrono::system_clock::now(), end + std::chrono::seconds(5));
  meter = GetJson("/apis/gpuaas.io/v1/namespaces/vision/usagerecords/window");
  EXPECT_EQ(meter["spec"]["end"], FormatTime(end)) << meter.dump();
  EXPECT_EQ(server_.Stop(), 0);
}

// A project whose money budget is spent, its loans included, borrows no more: its next borrower
// waits saying why (the one running goes on), the alerts count the loan, and raising the budget
// lets it borrow at once.
TEST_F(LendingE2eTest, ABorrowerWhoseProjectsBudgetIsSpentWaitsUntilTheBudgetAllowsIt) {
  std::string period;
  ASSERT_NO_FATAL_FAILURE(LendingPool(&period));
  // nlp may spend 0.001 USD: two seconds of a borrowed GPU at 1.8 USD/h.
  auto budget = [&](bool overrun) {
    auto r = client_->Put("/apis/gpuaas.io/v1/projects/nlp/budget",
                          json{{"amountMicros", 1000}, {"gpuHours", 0}, {"allowOverrun", overrun}}.dump(), kJson);
    return r ? r->status : 0;
  };
  ASSERT_EQ(budget(false), 200);
  auto borrow = [&](const std::string& name) {
    return Post("/apis/gpuaas.io/v1/namespaces/nlp/workloads",
                {{"apiVersion", "gpuaas.io/v1"}, {"kind", "Workload"}, {"metadata", {{"name", name}}},
                 {"spec", {{"resources", {{"nvidia.com/gpu", 1}}}, {"priorityClassName", "preemptible"}}}});
  };
  ASSERT_EQ(borrow("first"), 201);
  ASSERT_TRUE(Eventually([&] { return Workload("nlp", "first")["status"].value("phase", "") == "Running"; },
                         std::chrono::seconds(30)))
      << Workload("nlp", "first").dump();
  std::this_thread::sleep_for(std::chrono::seconds(3));  // 0.0015 USD borrowed: past the budget

  ASSERT_EQ(borrow("second"), 201);
  ASSERT_TRUE(Eventually([&] { return Workload("nlp", "second")["status"].value("reason", "") == "BudgetExceeded"; },
                         std::chrono::seconds(10)))
      << Workload("nlp", "second").dump();
  const json second = Workload("nlp", "second");
  EXPECT_EQ(second["status"]["phase"], "Pending");
  EXPECT_NE(second["status"]["message"].get<std::string>().find("budget"), std::string::npos) << second.dump();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_EQ(Workload("nlp", "second")["status"]["phase"], "Pending") << "the idle GPU is not lent to it";
  EXPECT_EQ(Workload("nlp", "first")["status"]["phase"], "Running") << "the running borrower goes on";
  bool alerted = false;
  const json alerts = GetJson("/api/v1/alerts");
  for (const json& a : alerts["items"]) {
    if (a.value("id", "") == "budget/nlp/money/100") alerted = true;
  }
  EXPECT_TRUE(alerted) << alerts.dump();

  // Overruns allowed: it borrows the idle GPU.
  ASSERT_EQ(budget(true), 200);
  ASSERT_TRUE(Eventually([&] { return Workload("nlp", "second")["status"].value("phase", "") == "Running"; },
                         std::chrono::seconds(10)))
      << Workload("nlp", "second").dump();
}

}  // namespace
}  // namespace gpuaas::testing
