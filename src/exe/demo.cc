#include "exe/demo.h"

#include <chrono>
#include <optional>
#include <vector>

#include "billing/billing.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "model/billing.h"
#include "model/pool.h"
#include "nlohmann/json.hpp"

namespace gpuaas::exe {
namespace {

// The demo's rate card, installed when the store has none: list prices per device-hour in USD.
// Illustrative figures (an H100 SXM at 3.99 USD an hour is a public on-demand price of 2026);
// MIG instances are priced by their compute slices.
void InstallDemoRateCard(store::Store& db, service::PoolService& pools) {
  absl::StatusOr<std::vector<store::Record>> cards = db.List(model::RateCard::kKind, "");
  if (!cards.ok() || !cards->empty()) return;
  model::RateCard card;
  card.metadata.name = "demo-list-prices";
  card.spec.currency = "USD";
  card.spec.effective_from = billing::MonthOf(RealClock::Get().Now()).start;
  card.spec.mig_pricing = model::RateCard::MigPricing::kCompute;
  card.spec.prices = {{"H200-SXM-141GB", "full", 4'500'000}, {"H100-SXM5-80GB", "full", 3'990'000},
                      {"A100-80GB", "full", 1'800'000},      {"B200-180GB", "full", 6'690'000},
                      {"L40S-48GB", "full", 1'200'000}};
  if (absl::StatusOr<model::RateCard> made = pools.CreateRateCard(card, "gpuaas-demo"); !made.ok()) {
    log::Warn("demo rate card not installed: {}", made.status().message());
  }
}

// The demo's operator and member tokens, kept in its store (kind DemoTokens) so that a restart
// on the same store keeps them working, as it keeps the state they go with: the exported
// GPUAAS_TOKEN and dashboard sessions stay valid. A demo store only: these two secrets sit in it
// in the clear (every other token is stored hashed). New ones when the store has none, or the
// kept ones no longer work (revoked); earlier demo tokens are then revoked.
struct DemoTokens {
  std::string operator_token;
  std::string member_token;
  bool kept = false;
};

absl::StatusOr<DemoTokens> KeepDemoTokens(store::Store& db, api::Authenticator& auth) {
  const store::Key key{"DemoTokens", "", "demo"};
  ASSIGN_OR_RETURN(std::optional<store::Record> have, db.Get(key));
  if (have) {
    const nlohmann::json j = nlohmann::json::parse(have->data, nullptr, false);
    DemoTokens t{j.is_object() ? j.value("operator", "") : "", j.is_object() ? j.value("member", "") : "", true};
    std::optional<api::Principal> op = auth.Authenticate(t.operator_token);
    std::optional<api::Principal> member = auth.Authenticate(t.member_token);
    if (op && member && op->role == api::Role::kOperator && member->project == "demo") return t;
  }
  if (absl::StatusOr<std::vector<api::TokenInfo>> old = auth.List(); old.ok()) {
    for (const api::TokenInfo& t : *old) {
      if (t.created_by == "gpuaas-demo") (void)auth.Revoke(t.id);
    }
  }
  ASSIGN_OR_RETURN(auto op, auth.Create("demo-operator", api::Role::kOperator, "", "gpuaas-demo"));
  ASSIGN_OR_RETURN(auto member, auth.Create("demo-member", api::Role::kMember, "demo", "gpuaas-demo"));
  const nlohmann::json j = {{"operator", op.first}, {"member", member.first}};
  RETURN_IF_ERROR(db.Transact([&](store::Txn& tx) { return tx.Put(key, "", j.dump(), store::kAnyVersion); }));
  return DemoTokens{op.first, member.first, false};
}

// On the demo's first start, project demo holds a pool in use (approved, billed from then) and a
// request waiting for an operator's decision, so the dashboard's queue and bills have something
// to show. A100s only: the H100s and H200s stay free to try things with.
void SeedDemoPools(service::PoolService& pools) {
  model::GpuPool training;
  training.metadata.name = "training";
  training.metadata.ns = "demo";
  training.spec.items = {{"A100-80GB", "full", 2}};
  if (pools.CreatePool(training, "demo-member").ok()) {
    (void)pools.Approve("demo", "training", true, "demo: approved at the first start", "gpuaas-demo");
  }
  model::GpuPool inference;
  inference.metadata.name = "inference";
  inference.metadata.ns = "demo";
  inference.spec.items = {{"A100-80GB", "1g.10gb", 4}, {"A100-80GB", "full", 1}};
  if (absl::StatusOr<model::GpuPool> made = pools.CreatePool(inference, "demo-member"); !made.ok()) {
    log::Warn("demo pool request not created: {}", made.status().message());
  }
}

}  // namespace

void SetUpDemo(store::Store& db, store::ObjectCache& cache, service::PoolService& pools, api::Authenticator* auth,
               const std::string& url, std::ostream& out) {
  InstallDemoRateCard(db, pools);
  if (auth == nullptr) return;
  // A project and fresh tokens to try the demo with; earlier demo tokens are revoked.
  model::Project demo;
  demo.metadata.name = "demo";
  demo.spec.display_name = "Demo project";
  const bool first_start = pools.CreateProject(demo, "gpuaas-demo").ok();
  cache.WaitFor(db.Revision(), std::chrono::seconds(5));
  if (first_start) {
    SeedDemoPools(pools);
    cache.WaitFor(db.Revision(), std::chrono::seconds(5));
  }
  absl::StatusOr<DemoTokens> tokens = KeepDemoTokens(db, *auth);
  if (!tokens.ok()) {
    log::Warn("demo tokens not made: {}", tokens.status().message());
    return;
  }
  out << "demo operator token:              " << tokens->operator_token << "\n"
      << "demo member token (project demo): " << tokens->member_token << "\n"
      << (tokens->kept ? "  (the same as at the last start: they are kept with the demo's state in the store)\n" : "")
      << "  export GPUAAS_TOKEN=" << tokens->operator_token << "\n"
      // Where the CLI finds this server, when it is not where it looks by default.
      << (url == "http://127.0.0.1:8080" ? "" : "  export GPUAAS_SERVER=" + url + "\n") << std::flush;
}

}  // namespace gpuaas::exe
