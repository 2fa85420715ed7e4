// Lending as pure functions: what may be lent, who borrows it (fairly, within limits), and the
// reclaim in the pool's admission; then a property test that drives both with a fake clock
// through 100,000 random events and checks the invariants of docs/lending.md, billing included.
#include "allocator/lending.h"

#include <deque>
#include <random>
#include <set>

#include "allocator/admission.h"
#include "billing/billing.h"
#include "catalog/catalog.h"
#include "fmt/format.h"
#include "gtest/gtest.h"

namespace gpuaas::allocator {
namespace {

using Kind = AdmissionStep::Kind;
using model::PriorityClass;
using model::Workload;
using model::WorkloadPhase;

const Time kT0 = std::chrono::system_clock::from_time_t(1764547200);  // 2025-12-01T00:00:00Z
constexpr std::string_view kH200 = "H200-SXM-141GB";

model::GpuPool LendingPool(const std::string& ns, const std::string& name, int gpus, int64_t idle_after,
                           int64_t grace) {
  model::GpuPool p;
  p.metadata.ns = ns;
  p.metadata.name = name;
  p.spec.items = {{std::string(kH200), "full", gpus}};
  p.spec.lending = model::GpuPool::Spec::Lending{true, idle_after, grace};
  p.status.approval = model::GpuPool::Approval{true, "ok", "ops", kT0};
  for (int i = 0; i < gpus; ++i) {
    p.status.allocation.push_back({"alpha", "alpha.n", fmt::format("GPU-{}-{}-{}", ns, name, i), "full", 0, ""});
  }
  model::SetCondition(p.status.conditions,
                      {std::string(model::kReady), model::ConditionStatus::kTrue, "Ready", "", kT0, 1});
  return p;
}

LenderView View(const model::GpuPool& p) {
  LenderView v;
  v.pool = &p;
  v.ready_since = kT0;
  for (const model::AllocatedDevice& d : p.status.allocation) v.model_of_gpu[d.gpu_uuid] = std::string(kH200);
  return v;
}

Workload Borrower(const std::string& ns, const std::string& name, int64_t count, int created = 0) {
  Workload w;
  w.metadata.ns = ns;
  w.metadata.name = name;
  w.metadata.creation_timestamp = kT0 + std::chrono::seconds(created);
  w.spec = {"", "nvidia.com/gpu", count, PriorityClass::kPreemptible};
  return w;
}

Workload Owner(const model::GpuPool& p, const std::string& name, int64_t count, int created = 0) {
  Workload w;
  w.metadata.ns = p.metadata.ns;
  w.metadata.name = name;
  w.metadata.creation_timestamp = kT0 + std::chrono::seconds(created);
  w.spec = {p.metadata.name, "nvidia.com/gpu", count, PriorityClass::kBatch};
  return w;
}

void RunOn(Workload& w, const model::GpuPool& lender, std::vector<int> gpus) {
  w.status.phase = WorkloadPhase::kRunning;
  for (int g : gpus) w.status.devices.push_back({lender.status.allocation[g].gpu_uuid, ""});
  if (model::IsBorrower(w)) w.status.borrowed_from = Workload::Lender{lender.metadata.ns, lender.metadata.name};
}

TEST(Lendable, OnlyDevicesIdleLongEnoughAndNotWhileTheOwnerWaits) {
  model::GpuPool p = LendingPool("vision", "train", 4, 600, 30);
  LenderView v = View(p);
  Workload run = Owner(p, "run", 1);
  RunOn(run, p, {0});
  v.owner = {&run};
  v.last_used[LendKey({p.status.allocation[1].gpu_uuid, ""})] = kT0 + std::chrono::seconds(500);
  std::optional<Time> next;
  // At 599 s nothing has been idle 600 s; at 600 s devices 2 and 3 (never used) have.
  EXPECT_TRUE(Lendable(v, kT0 + std::chrono::seconds(599), &next).empty());
  EXPECT_EQ(next, kT0 + std::chrono::seconds(600));
  next.reset();
  std::vector<LendableDevice> at600 = Lendable(v, kT0 + std::chrono::seconds(600), &next);
  ASSERT_EQ(at600.size(), 2u);
  EXPECT_EQ(at600[0].device.gpu_uuid, p.status.allocation[2].gpu_uuid);
  EXPECT_EQ(next, kT0 + std::chrono::seconds(1100));  // device 1, last used at 500 s
  // The owner's own work waiting for a whole GPU: nothing of that profile is lent.
  Workload waiting = Owner(p, "wait", 1);
  v.owner.push_back(&waiting);
  EXPECT_TRUE(Lendable(v, kT0 + std::chrono::hours(1)).empty());
  // Lending off, or a pool being released: nothing.
  v.owner = {};
  p.spec.lending->enabled = false;
  EXPECT_TRUE(Lendable(v, kT0 + std::chrono::hours(1)).empty());
  p.spec.lending->enabled = true;
  p.spec.release_requested = model::GpuPool::Spec::ReleaseRequest{"u", kT0};
  EXPECT_TRUE(Lendable(v, kT0 + std::chrono::hours(1)).empty());
}

TEST(Lend, FairAcrossProjectsByRecentBorrowingNotFirstCome) {
  model::GpuPool p = LendingPool("vision", "train", 3, 0, 30);
  std::vector<LenderView> lenders = {View(p)};
  std::vector<std::vector<LendableDevice>> offer = {Lendable(lenders[0], kT0)};
  ASSERT_EQ(offer[0].size(), 3u);
  // "heavy" asked first, but borrowed much lately: "light" is served first, then "heavy".
  std::vector<Workload> ws = {Borrower("heavy", "h1", 1, 0), Borrower("heavy", "h2", 1, 1),
                              Borrower("light", "l1", 1, 5), Borrower("light", "l2", 1, 6)};
  BorrowingState st;
  st.recent_gpu_seconds = {{"heavy", 36000}, {"light", 10}};
  std::vector<const Workload*> ptrs = {&ws[0], &ws[1], &ws[2], &ws[3]};
  LendingDecision d = Lend(lenders, offer, ptrs, st);
  ASSERT_EQ(d.loans.size(), 3u);
  EXPECT_EQ(d.loans[0].borrower, 2u);  // light's oldest
  EXPECT_EQ(d.loans[1].borrower, 3u);  // light again: it still borrowed the least lately
  EXPECT_EQ(d.loans[2].borrower, 0u);  // then heavy's oldest
  ASSERT_EQ(d.waits.size(), 1u);
  EXPECT_EQ(d.waits[0].borrower, 1u);
  // With equal borrowing lately, each placement moves a project down: they take turns.
  st.recent_gpu_seconds = {};
  d = Lend(lenders, offer, ptrs, st);
  ASSERT_EQ(d.loans.size(), 3u);
  EXPECT_EQ(d.loans[0].borrower, 0u);  // heavy (by name, both at 0 devices)
  EXPECT_EQ(d.loans[1].borrower, 2u);  // light: heavy now holds one
  EXPECT_EQ(d.loans[2].borrower, 1u);
}

TEST(Lend, NeverFromItsOwnProjectAndWithinTheBorrowingLimitAndModel) {
  model::GpuPool p = LendingPool("vision", "train", 4, 0, 30);
  std::vector<LenderView> lenders = {View(p)};
  std::vector<std::vector<LendableDevice>> offer = {Lendable(lenders[0], kT0)};
  std::vector<Workload> ws = {Borrower("vision", "self", 1), Borrower("nlp", "big", 3), Borrower("nlp", "small", 1),
                              Borrower("speech", "a100", 1)};
  ws[3].spec.model = "A100-SXM4-80GB";
  BorrowingState st;
  st.limits["nlp"][std::string(kH200)] = 2;
  std::vector<const Workload*> ptrs = {&ws[0], &ws[1], &ws[2], &ws[3]};
  LendingDecision d = Lend(lenders, offer, ptrs, st);
  ASSERT_EQ(d.loans.size(), 1u);
  EXPECT_EQ(d.loans[0].borrower, 2u);  // nlp's 3 would pass its limit of 2; its 1 does not
  std::map<size_t, std::string> why;
  for (const BorrowerWait& w : d.waits) why[w.borrower] = w.message;
  EXPECT_NE(why[0].find("another project"), std::string::npos) << why[0];
  EXPECT_NE(why[1].find("at most 2"), std::string::npos) << why[1];
  EXPECT_NE(why[3].find("A100-SXM4-80GB"), std::string::npos) << why[3];
}

TEST(Reclaim, EveryBorrowerOnTheDevicesNeededIsToldInOnePassAndOnlyOnce) {
  model::GpuPool p = LendingPool("vision", "train", 100, 0, 30);
  std::vector<Workload> borrowers;
  for (int i = 0; i < 100; ++i) {
    borrowers.push_back(Borrower("nlp", fmt::format("b{}", i), 1));
    RunOn(borrowers.back(), p, {i});
  }
  std::vector<const Workload*> bp;
  for (const Workload& b : borrowers) bp.push_back(&b);
  Workload big = Owner(p, "big", 100);
  const Time now = kT0 + std::chrono::hours(1);
  AdmissionDecision d = Admit(&p, {&big}, bp, now);
  EXPECT_EQ(d.Count(Kind::kReclaim), 100);
  for (const AdmissionStep& s : d.steps) {
    if (s.kind == Kind::kReclaim) {
      EXPECT_EQ(s.deadline, now + std::chrono::seconds(30));
    }
  }
  EXPECT_EQ(d.Count(Kind::kWait, "Reclaiming"), 1);
  // Told once: the next decision tells nobody again, and the owner keeps waiting.
  for (Workload& b : borrowers) b.status.reclaim_deadline = now + std::chrono::seconds(30);
  big.status.reason = "Reclaiming";
  AdmissionDecision again = Admit(&p, {&big}, bp, now + std::chrono::seconds(10));
  EXPECT_EQ(again.Count(Kind::kReclaim), 0);
  EXPECT_EQ(again.Count(Kind::kStart), 0);
  // At the deadline every one left is removed, and the owner starts in the same decision.
  borrowers[7].status.phase = WorkloadPhase::kSucceeded;  // one left early
  AdmissionDecision at = Admit(&p, {&big}, bp, now + std::chrono::seconds(30));
  EXPECT_EQ(at.Count(Kind::kEnd, "Reclaimed"), 99);
  EXPECT_EQ(at.Count(Kind::kStart), 1);
}

TEST(Reclaim, OnlyAsManyAsTheOwnerNeedsAndNoneWhenThatCannotHelp) {
  model::GpuPool p = LendingPool("vision", "train", 4, 0, 30);
  std::vector<Workload> borrowers;
  for (int i = 0; i < 3; ++i) {
    borrowers.push_back(Borrower("nlp", fmt::format("b{}", i), 1));
    RunOn(borrowers.back(), p, {i + 1});
  }
  std::vector<const Workload*> bp;
  for (const Workload& b : borrowers) bp.push_back(&b);
  Workload two = Owner(p, "two", 2);
  AdmissionDecision d = Admit(&p, {&two}, bp, kT0);
  EXPECT_EQ(d.Count(Kind::kReclaim), 1);  // device 0 is free: one more is enough
  Workload five = Owner(p, "five", 5);
  EXPECT_EQ(Admit(&p, {&five}, bp, kT0).Count(Kind::kReclaim), 0);  // 5 > 4: reclaiming cannot help
  // Lending switched off: every borrower is told.
  p.spec.lending->enabled = false;
  EXPECT_EQ(Admit(&p, {}, bp, kT0).Count(Kind::kReclaim), 3);
  // The pool released: borrowers queue again at once.
  p.spec.release_requested = model::GpuPool::Spec::ReleaseRequest{"u", kT0};
  EXPECT_EQ(Admit(&p, {}, bp, kT0).Count(Kind::kEnd, "PoolReleased"), 3);
}

TEST(LoanBilling, AReservationsLenderIsCreditedOnlyFromItsStart) {
  model::RateCard card;
  card.metadata.name = "list";
  card.spec.currency = "USD";
  card.spec.effective_from = kT0 - std::chrono::days(1);
  card.spec.prices = {{std::string(kH200), "full", 3'600'000}};
  model::Loan l;
  l.spec = {"nlp", "sweep", "vision", "eval", std::string(kH200), "full", {{"GPU-1", ""}},
            kT0, kT0 + std::chrono::seconds(100), "Reclaimed"};
  l.spec.credit_from = kT0 + std::chrono::seconds(60);
  auto line = [&](const std::string& project) {
    billing::Invoice inv;
    inv.project = project;
    inv.period = billing::MonthOf(kT0);
    billing::AddLoans(inv, {l}, billing::PriceBook({card}), kT0 + std::chrono::hours(1));
    return inv.lines.at(0);
  };
  EXPECT_EQ(line("nlp").seconds, 100);    // the borrower pays every second it ran
  EXPECT_EQ(line("vision").seconds, 40);  // the lender earns from its start, when its own billing began
  EXPECT_EQ(line("nlp").amount_micros, 40'000);  // 100 s x 1.44 an hour (40% of 3.60)
  EXPECT_EQ(line("vision").amount_micros, -16'000);
}

// --- The property test ---------------------------------------------------------------------

// A world of lending pools, their owners' work and borrowers, reconciled as the workload and
// lending controllers do (admission per pool, then lending), at every event and deadline.
class World {
 public:
  explicit World(uint32_t seed) : rng_(seed) {
    pools_.push_back(LendingPool("vision", "train", 8, 60, 30));
    pools_.push_back(LendingPool("nlp", "serve", 4, 0, 10));
    pools_.push_back(LendingPool("speech", "dev", 2, 300, 0));
    pools_[1].spec.time_slicing_replicas = 2;
    for (const model::GpuPool& p : pools_) {
      for (const model::AllocatedDevice& d : p.status.allocation) device_pool_[d.gpu_uuid] = &p;
    }
  }

  void Step() {
    std::uniform_int_distribution<int> pick(0, 99);
    const int e = pick(rng_);
    if (e < 20) {
      SubmitOwner();
    } else if (e < 35) {
      EndOne(/*borrower=*/false);
    } else if (e < 60) {
      SubmitBorrower();
    } else if (e < 72) {
      EndOne(/*borrower=*/true);
    } else if (e < 74) {
      ToggleLending();
    } else {
      Advance(std::chrono::seconds(std::uniform_int_distribution<int>(1, 45)(rng_)));
    }
    Reconcile();
    Check();
  }

  void Finish() {
    // Everything ends; the ledger is then closed.
    for (Workload& w : live_) {
      if (w.status.phase == WorkloadPhase::kRunning) End(w, WorkloadPhase::kSucceeded, "Completed");
    }
  }

  // What the test asserts at the end.
  int64_t reclaims = 0, removals = 0, loans_started = 0, owner_starts = 0;
  double lent_device_seconds = 0;  // the ground truth, integrated as the clock moves
  std::vector<model::Loan> receipts;
  Time now = kT0;

 private:
  void SubmitOwner() {
    if (live_.size() > 60) return;  // a bounded world: work also ends
    model::GpuPool& p = pools_[std::uniform_int_distribution<size_t>(0, pools_.size() - 1)(rng_)];
    const int64_t n = std::uniform_int_distribution<int64_t>(1, static_cast<int64_t>(p.status.allocation.size()))(rng_);
    Workload w = Owner(p, fmt::format("o{}", ++serial_), n);
    w.metadata.creation_timestamp = now;
    w.spec.priority = pick_bool(0.3) ? PriorityClass::kInference : PriorityClass::kBatch;
    live_.push_back(std::move(w));
  }
  void SubmitBorrower() {
    if (live_.size() > 60) return;
    static const char* kProjects[] = {"vision", "nlp", "speech", "guest"};
    Workload w = Borrower(kProjects[std::uniform_int_distribution<int>(0, 3)(rng_)], fmt::format("b{}", ++serial_),
                          std::uniform_int_distribution<int64_t>(1, 3)(rng_));
    w.metadata.creation_timestamp = now;
    w.spec.requeue_on_reclaim = pick_bool(0.8);
    live_.push_back(std::move(w));
  }
  // A run ends, or a waiting workload is withdrawn.
  void EndOne(bool borrower) {
    std::vector<Workload*> running;
    for (Workload& w : live_) {
      if (model::IsBorrower(w) == borrower) running.push_back(&w);
    }
    if (running.empty()) return;
    End(*running[std::uniform_int_distribution<size_t>(0, running.size() - 1)(rng_)], WorkloadPhase::kSucceeded,
        "Completed");
  }
  void ToggleLending() {
    model::GpuPool& p = pools_[std::uniform_int_distribution<size_t>(0, pools_.size() - 1)(rng_)];
    p.spec.lending->enabled = !p.spec.lending->enabled;
  }
  bool pick_bool(double p) { return std::bernoulli_distribution(p)(rng_); }

  // The clock moves to `now + d`, stopping at every reclaim deadline and idle expiry on the way
  // (the controllers' RequeueAfter), integrating the lent device-seconds.
  void Advance(Duration d) {
    const Time until = now + d;
    while (now < until) {
      Time stop = until;
      for (const Workload& w : live_) {
        if (w.status.reclaim_deadline && *w.status.reclaim_deadline > now) stop = std::min(stop, *w.status.reclaim_deadline);
      }
      if (next_idle_ && *next_idle_ > now) stop = std::min(stop, *next_idle_);
      for (const Workload& w : live_) {
        if (model::IsBorrower(w) && w.status.phase == WorkloadPhase::kRunning) {
          lent_device_seconds += std::chrono::duration<double>(stop - now).count() * w.status.devices.size();
        }
      }
      now = stop;
      Reconcile();
      Check();
    }
  }

  void End(Workload& w, WorkloadPhase phase, const std::string& reason) {
    if (w.status.borrowed_from) CloseReceipt(w, reason);
    w.status.phase = phase;
    w.status.reason = reason;
    w.status.devices.clear();
    w.status.borrowed_from.reset();
    w.status.reclaim_deadline.reset();
    ++run_;  // a new run id for whatever runs next
  }
  void CloseReceipt(const Workload& w, const std::string& reason) {
    model::Loan& l = receipts[open_receipt_.at(w.metadata.ns + "/" + w.metadata.name)];
    l.spec.end = now;
    l.spec.end_reason = reason;
    open_receipt_.erase(w.metadata.ns + "/" + w.metadata.name);
  }

  void Reconcile() {
    for (int round = 0;; ++round) {
      ASSERT_LT(round, 100) << "the controllers do not settle at " << FormatTime(now);
      bool changed = false;
      // The workload controller, pool by pool.
      for (model::GpuPool& p : pools_) {
        std::vector<Workload*> mine, lent;
        std::vector<const Workload*> mv, lv;
        for (Workload& w : live_) {
          if (w.status.phase != WorkloadPhase::kPending && w.status.phase != WorkloadPhase::kRunning) continue;
          if (w.spec.pool == p.metadata.name && w.metadata.ns == p.metadata.ns) {
            mine.push_back(&w);
            mv.push_back(&w);
          } else if (w.status.borrowed_from && w.status.borrowed_from->project == p.metadata.ns &&
                     w.status.borrowed_from->pool == p.metadata.name) {
            lent.push_back(&w);
            lv.push_back(&w);
          }
        }
        const AdmissionDecision d = Admit(&p, mv, lv, now);
        for (const AdmissionStep& s : d.steps) {
          Workload& w = s.borrower ? *lent[s.workload] : *mine[s.workload];
          changed = changed || s.kind != Kind::kWait;
          switch (s.kind) {
            case Kind::kReclaim:
              ASSERT_FALSE(w.status.reclaim_deadline) << "told twice: " << w.metadata.name;
              ASSERT_TRUE(told_.insert({w.metadata.name, run_of_[w.metadata.name]}).second)
                  << "reclaimed twice in one run: " << w.metadata.name;
              w.status.reclaim_deadline = s.deadline;
              w.status.reason = "Reclaimed";
              ++reclaims;
              break;
            case Kind::kEnd:
              if (s.borrower && s.reason == "Reclaimed") {
                ASSERT_LE(*w.status.reclaim_deadline, now) << "removed before its deadline";
                ++removals;
              }
              if (!s.borrower) {
                for (const model::WorkloadDevice& dv : w.status.devices) last_used_[LendKey(dv)] = now;
              }
              End(w, s.phase, s.reason);
              w.status.reason = s.reason;
              break;
            case Kind::kStart:
              w.status.phase = WorkloadPhase::kRunning;
              w.status.devices = s.devices;
              for (const model::WorkloadDevice& dv : s.devices) last_used_[LendKey(dv)] = now;
              ++owner_starts;
              break;
            case Kind::kWait:
              w.status.reason = s.reason;
              break;
          }
        }
      }
      // Owner runs keep their devices in use.
      for (const Workload& w : live_) {
        if (!model::IsBorrower(w) && w.status.phase == WorkloadPhase::kRunning) {
          for (const model::WorkloadDevice& dv : w.status.devices) last_used_[LendKey(dv)] = now;
        }
      }
      // The lending controller.
      std::vector<LenderView> views;
      for (const model::GpuPool& p : pools_) {
        LenderView v = View(p);
        for (const auto& [k, t] : last_used_) v.last_used[k] = t;
        for (const Workload& w : live_) {
          if (w.status.phase != WorkloadPhase::kPending && w.status.phase != WorkloadPhase::kRunning) continue;
          if (w.spec.pool == p.metadata.name && w.metadata.ns == p.metadata.ns) v.owner.push_back(&w);
          if (w.status.borrowed_from && w.status.borrowed_from->project == p.metadata.ns &&
              w.status.borrowed_from->pool == p.metadata.name && w.status.phase == WorkloadPhase::kRunning) {
            v.borrowers.push_back(&w);
          }
        }
        views.push_back(std::move(v));
      }
      next_idle_.reset();
      std::vector<std::vector<LendableDevice>> offer;
      for (const LenderView& v : views) offer.push_back(Lendable(v, now, &next_idle_));
      std::vector<Workload*> waiting;
      std::vector<const Workload*> wv;
      BorrowingState st;
      for (Workload& w : live_) {
        if (!model::IsBorrower(w)) continue;
        if (w.status.phase == WorkloadPhase::kPending) {
          waiting.push_back(&w);
          wv.push_back(&w);
        } else if (w.status.phase == WorkloadPhase::kRunning) {
          st.held[w.metadata.ns][std::string(kH200)] += static_cast<int64_t>(w.status.devices.size());
        }
      }
      st.limits["guest"][std::string(kH200)] = 3;
      std::erase_if(recent_, [&](size_t i) { return receipts[i].spec.end && *receipts[i].spec.end <= now - kFairnessWindow; });
      for (size_t i : recent_) {
        const model::Loan& l = receipts[i];
        const Time end = l.spec.end.value_or(now);
        if (end > now - kFairnessWindow) {
          st.recent_gpu_seconds[l.spec.borrower] +=
              std::chrono::duration<double>(end - std::max(l.spec.start, now - kFairnessWindow)).count() *
              l.spec.devices.size();
        }
      }
      const LendingDecision ld = Lend(views, offer, wv, st);
      for (const Borrowing& b : ld.loans) {
        Workload& w = *waiting[b.borrower];
        const model::GpuPool& p = pools_[b.lender];
        ASSERT_NE(p.metadata.ns, w.metadata.ns);
        w.status.phase = WorkloadPhase::kRunning;
        w.status.devices = b.devices;
        w.status.borrowed_from = Workload::Lender{p.metadata.ns, p.metadata.name};
        w.status.reclaim_deadline.reset();
        run_of_[w.metadata.name] = ++run_;
        model::Loan l;
        l.metadata.name = fmt::format("{}.{}-{}", w.metadata.ns, w.metadata.name, run_);
        l.spec = {w.metadata.ns, w.metadata.name, p.metadata.ns, p.metadata.name, b.model, b.profile, b.devices,
                  now, std::nullopt, ""};
        open_receipt_[w.metadata.ns + "/" + w.metadata.name] = receipts.size();
        recent_.push_back(receipts.size());
        receipts.push_back(std::move(l));
        ++loans_started;
        changed = true;
      }
      if (!changed) break;
    }
    // Forget what has ended (its receipts stay).
    std::erase_if(live_, [](const Workload& w) {
      return w.status.phase == WorkloadPhase::kSucceeded || w.status.phase == WorkloadPhase::kEvicted;
    });
  }

  void Check() {
    // No borrower past its deadline; no device with two runs beyond time slicing; a lent device
    // holds its borrower alone.
    std::map<std::string, int64_t> owner_runs;
    std::map<std::string, int64_t> borrower_runs;
    for (const Workload& w : live_) {
      if (w.status.phase != WorkloadPhase::kRunning) continue;
      if (w.status.reclaim_deadline) {
        ASSERT_GT(*w.status.reclaim_deadline, now) << w.metadata.name << " overstayed";
      }
      for (const model::WorkloadDevice& d : w.status.devices) {
        ++(w.status.borrowed_from ? borrower_runs : owner_runs)[LendKey(d)];
        ASSERT_TRUE(device_pool_.contains(d.gpu_uuid));
      }
    }
    for (const auto& [dev, n] : borrower_runs) {
      ASSERT_EQ(n, 1) << dev << " lent twice";
      ASSERT_EQ(owner_runs[dev], 0) << dev << " lent while its owner runs on it";
    }
    for (const auto& [dev, n] : owner_runs) {
      const model::GpuPool& p = *device_pool_.at(dev.substr(0, dev.find('/')));
      ASSERT_LE(n, std::max<int64_t>(1, p.spec.time_slicing_replicas)) << dev;
    }
    // The owner is never below its allocation: the first of its waiting work that its devices
    // could hold is held back only by borrowers already told to leave (and gone at their
    // deadline, checked above), never by one left lending.
    for (const model::GpuPool& p : pools_) {
      const int64_t alloc = static_cast<int64_t>(p.status.allocation.size());
      int64_t owner_used = 0, untold = 0, told = 0;
      std::set<std::string> used_devices;
      const Workload* first = nullptr;
      for (const Workload& w : live_) {
        const bool mine = w.spec.pool == p.metadata.name && w.metadata.ns == p.metadata.ns;
        const bool lent = w.status.borrowed_from && w.status.borrowed_from->project == p.metadata.ns &&
                          w.status.borrowed_from->pool == p.metadata.name && w.status.phase == WorkloadPhase::kRunning;
        if (mine && w.status.phase == WorkloadPhase::kRunning) {
          for (const model::WorkloadDevice& d : w.status.devices) used_devices.insert(LendKey(d));
        }
        if (lent) (w.status.reclaim_deadline ? told : untold) += static_cast<int64_t>(w.status.devices.size());
        if (mine && w.status.phase == WorkloadPhase::kPending &&
            (first == nullptr || std::tie(w.spec.priority, w.metadata.creation_timestamp, w.metadata.name) <
                                     std::tie(first->spec.priority, first->metadata.creation_timestamp,
                                              first->metadata.name))) {
          first = &w;
        }
      }
      owner_used = static_cast<int64_t>(used_devices.size());
      if (first == nullptr || first->spec.count > alloc - owner_used || p.spec.time_slicing_replicas > 1) continue;
      const int64_t free = alloc - owner_used - untold - told;
      ASSERT_GE(free + told, first->spec.count)
          << p.metadata.name << ": " << first->metadata.name << " needs " << first->spec.count << ", free " << free
          << ", told " << told << ", untold " << untold << " at " << FormatTime(now);
    }
  }

  std::mt19937 rng_;
  std::vector<model::GpuPool> pools_;
  std::map<std::string, const model::GpuPool*> device_pool_;
  std::deque<Workload> live_;
  std::map<std::string, Time> last_used_;
  std::map<std::string, size_t> open_receipt_;
  std::map<std::string, int64_t> run_of_;
  std::set<std::pair<std::string, int64_t>> told_;
  std::optional<Time> next_idle_;
  std::vector<size_t> recent_;  // receipts open or ended within the fairness window
  int64_t serial_ = 0;
  int64_t run_ = 0;
};

TEST(LendingProperty, HundredThousandRandomEventsKeepEveryInvariant) {
  World world(20261205);
  for (int i = 0; i < 100000; ++i) {
    world.Step();
    if (::testing::Test::HasFatalFailure()) FAIL() << "at event " << i;
  }
  world.Finish();
  // Something of everything happened.
  EXPECT_GT(world.loans_started, 1000);
  EXPECT_GT(world.reclaims, 100);
  EXPECT_GT(world.removals, 10);
  EXPECT_GT(world.owner_starts, 1000);
  ASSERT_LT(world.now, kT0 + std::chrono::days(31)) << "the run must stay in one month for the ledger below";

  // Every lent device-second is charged once to its borrower and credited once to its lender,
  // to the second and the micro-unit.
  model::RateCard card;
  card.metadata.name = "list";
  card.spec.currency = "USD";
  card.spec.effective_from = kT0 - std::chrono::days(1);
  card.spec.prices = {{std::string(kH200), "full", 3'990'000}};
  const billing::PriceBook prices({card});
  int64_t charged_seconds = 0, credited_seconds = 0;
  billing::Micros charged = 0, credited = 0;
  for (const std::string project : {"vision", "nlp", "speech", "guest"}) {
    billing::Invoice inv;
    inv.project = project;
    inv.period = billing::MonthOf(kT0);
    billing::AddLoans(inv, world.receipts, prices, world.now);
    for (const billing::Line& l : inv.lines) {
      (l.loan == "borrowed" ? charged_seconds : credited_seconds) += l.seconds * l.quantity;
      (l.loan == "borrowed" ? charged : credited) += l.amount_micros;
      EXPECT_EQ(l.unit_price_micros, 1'596'000);  // 40% of 3.99
    }
  }
  int64_t receipt_seconds = 0;
  for (const model::Loan& l : world.receipts) {
    ASSERT_TRUE(l.spec.end) << l.metadata.name;
    receipt_seconds += std::chrono::duration_cast<std::chrono::seconds>(*l.spec.end - l.spec.start).count() *
                       static_cast<int64_t>(l.spec.devices.size());
  }
  EXPECT_EQ(charged_seconds, receipt_seconds);
  EXPECT_EQ(credited_seconds, receipt_seconds);
  EXPECT_NEAR(static_cast<double>(receipt_seconds), world.lent_device_seconds, 0.5);
  EXPECT_GT(charged, 0);
  EXPECT_EQ(charged, -credited);
}

}  // namespace
}  // namespace gpuaas::allocator
