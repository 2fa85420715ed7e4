// Rating: a year of per-second usage of 10,000 pools (100 projects of 100 pools, one to three
// items each, H200 full GPUs and MIG instances), a rate card that changes every month, into
// monthly invoices. gpuaas's rating (src/billing) against the same computation written as SQL
// in SQLite (in memory, indexed), in the same run; both must agree to the micro-unit.
//
// A segment is one pool item over one stretch of one month under one rate card: the unit both
// sides sum into invoice lines.
//
// Usage: build/release/bench/billing_bench [POOLS [ROUNDS]]
#include <sqlite3.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "billing/billing.h"
#include "fmt/format.h"

namespace {

using gpuaas::Time;
using gpuaas::billing::Micros;
using Clock = std::chrono::steady_clock;

Time Month(int m) { return Time(std::chrono::sys_days(std::chrono::year(2026) / m / 1)); }
int64_t Sec(Time t) { return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count(); }

void Exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::fprintf(stderr, "sqlite: %s\n", err);
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int pools = argc > 1 ? std::atoi(argv[1]) : 10000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  const std::vector<std::string> profiles = {"full", "1g.18gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"};
  std::mt19937_64 rng(20261203);

  // Twelve cards, one a month, the full-GPU price moving; MIG priced by compute slices.
  std::vector<gpuaas::model::RateCard> cards;
  for (int m = 1; m <= 12; ++m) {
    gpuaas::model::RateCard c;
    c.metadata.name = fmt::format("list-2026-{:02}", m);
    c.spec.currency = "USD";
    c.spec.effective_from = Month(m);
    c.spec.prices = {{"H200-SXM-141GB", "full", 3'000'000 + static_cast<int64_t>(rng() % 2'000'000)}};
    cards.push_back(c);
  }
  const gpuaas::billing::PriceBook prices(cards);

  // Pools spread over the year, most released after hours to weeks, some still running.
  std::map<std::string, std::vector<gpuaas::model::UsageRecord>> by_project;
  const Time year_start = Month(1), year_end = Time(std::chrono::sys_days(std::chrono::year(2027) / 1 / 1));
  const int64_t year_s = Sec(year_end) - Sec(year_start);
  for (int i = 0; i < pools; ++i) {
    gpuaas::model::UsageRecord r;
    r.metadata.ns = fmt::format("project-{:03}", i % 100);
    r.spec.pool = fmt::format("pool-{:05}", i);
    const int n = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < n; ++k) r.spec.items.push_back({"H200-SXM-141GB", profiles[(i + k) % profiles.size()], 1 + static_cast<int64_t>(rng() % 8)});
    r.spec.start = year_start + std::chrono::seconds(rng() % year_s);
    if (rng() % 5 != 0) r.spec.end = r.spec.start + std::chrono::seconds(3600 + rng() % (60 * 86400));
    if (r.spec.end && *r.spec.end > year_end) r.spec.end = year_end;
    by_project[r.metadata.ns].push_back(std::move(r));
  }
  const Time now = year_end;  // the year as a whole, every month final

  // gpuaas: every project's invoice of every month.
  Micros ours_total = 0;
  int64_t segments = 0;
  double ours_best = 1e18;
  for (int round = 0; round < rounds; ++round) {
    const auto t0 = Clock::now();
    Micros total = 0;
    int64_t lines = 0;
    for (int m = 1; m <= 12; ++m) {
      const gpuaas::billing::Period month = gpuaas::billing::MonthOf(Month(m));
      for (const auto& [project, records] : by_project) {
        const gpuaas::billing::Invoice inv = gpuaas::billing::Rate(project, records, prices, month, now);
        total += inv.total_micros;
        lines += static_cast<int64_t>(inv.lines.size());
      }
    }
    ours_best = std::min(ours_best, std::chrono::duration<double>(Clock::now() - t0).count());
    ours_total = total;
    segments = lines;  // one card a month: a line is a segment
  }

  // SQLite: the same usage, prices per (card, model, profile) as the card derives them, months,
  // and one query that cuts, prices and rounds.
  sqlite3* db = nullptr;
  sqlite3_open(":memory:", &db);
  Exec(db, "CREATE TABLE usage(project TEXT, pool TEXT, model TEXT, profile TEXT, qty INTEGER, start INTEGER, "
           "finish INTEGER)");
  Exec(db, "CREATE TABLE prices(card TEXT, model TEXT, profile TEXT, price INTEGER, eff_from INTEGER, eff_to INTEGER)");
  Exec(db, "CREATE TABLE months(start INTEGER, finish INTEGER)");
  Exec(db, "BEGIN");
  for (const auto& [project, records] : by_project) {
    for (const auto& r : records) {
      for (const auto& item : r.spec.items) {
        Exec(db, fmt::format("INSERT INTO usage VALUES('{}','{}','{}','{}',{},{},{})", project, r.spec.pool, item.model,
                             item.profile, item.count, Sec(r.spec.start), Sec(r.spec.end.value_or(now))));
      }
    }
  }
  for (size_t i = 0; i < cards.size(); ++i) {
    const int64_t to = i + 1 < cards.size() ? Sec(cards[i + 1].spec.effective_from) : Sec(year_end) + 86400LL * 3650;
    for (const std::string& p : profiles) {
      Exec(db, fmt::format("INSERT INTO prices VALUES('{}','H200-SXM-141GB','{}',{},{},{})", cards[i].metadata.name, p,
                           *gpuaas::billing::UnitPrice(cards[i], "H200-SXM-141GB", p), Sec(cards[i].spec.effective_from), to));
    }
  }
  for (int m = 1; m <= 12; ++m) {
    const gpuaas::billing::Period month = gpuaas::billing::MonthOf(Month(m));
    Exec(db, fmt::format("INSERT INTO months VALUES({},{})", Sec(month.start), Sec(month.end)));
  }
  Exec(db, "COMMIT");
  Exec(db, "CREATE INDEX usage_project ON usage(project, start)");
  Exec(db, "CREATE INDEX prices_item ON prices(model, profile, eff_from)");
  const char* kQuery = R"sql(
    SELECT SUM(amount), COUNT(*) FROM (
      SELECT (SUM(MIN(u.finish, p.eff_to, m.finish) - MAX(u.start, p.eff_from, m.start)) * u.qty * p.price + 1800)
             / 3600 AS amount
      FROM usage u
      JOIN months m ON u.start < m.finish AND u.finish > m.start
      JOIN prices p ON p.model = u.model AND p.profile = u.profile
                   AND p.eff_from < MIN(u.finish, m.finish) AND p.eff_to > MAX(u.start, m.start)
      GROUP BY u.project, m.start, u.pool, u.model, u.profile, p.card))sql";
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, kQuery, -1, &stmt, nullptr);
  int64_t sql_total = 0, sql_lines = 0;
  double sql_best = 1e18;
  for (int round = 0; round < rounds; ++round) {
    const auto t0 = Clock::now();
    sqlite3_reset(stmt);
    if (sqlite3_step(stmt) == SQLITE_ROW) {
      sql_total = sqlite3_column_int64(stmt, 0);
      sql_lines = sqlite3_column_int64(stmt, 1);
    }
    sql_best = std::min(sql_best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);

  std::printf("%d pools, a year of per-second usage, 12 rate cards; best of %d rounds\n", pools, rounds);
  std::printf("  gpuaas rating:  %lld segments in %.3f s = %.0f segments/s\n", static_cast<long long>(segments),
              ours_best, static_cast<double>(segments) / ours_best);
  std::printf("  SQLite (SQL):   %lld segments in %.3f s = %.0f segments/s\n", static_cast<long long>(sql_lines),
              sql_best, static_cast<double>(sql_lines) / sql_best);
  std::printf("  ratio: gpuaas %.1fx the SQL's rate\n", sql_best / ours_best);
  std::printf("  totals: gpuaas %lld, SQL %lld micro-units: %s\n", static_cast<long long>(ours_total),
              static_cast<long long>(sql_total), ours_total == sql_total && segments == sql_lines ? "equal" : "DIFFERENT");
  return ours_total == sql_total && segments == sql_lines ? 0 : 1;
}
