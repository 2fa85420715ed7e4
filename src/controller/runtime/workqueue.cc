#include "controller/runtime/workqueue.h"

#include <algorithm>

namespace gpuaas::controller::runtime {

Duration BackoffPolicy::After(int failures) const {
  if (failures <= 1) return std::min(base, cap);
  Duration d = base;
  for (int i = 1; i < failures && d < cap; ++i) d *= 2;
  return std::min(d, cap);
}

WorkQueue::WorkQueue(std::string name, const Clock& clock, BackoffPolicy backoff)
    : name_(std::move(name)), clock_(clock), backoff_(backoff) {}

void WorkQueue::ReadyLocked(const std::string& key) {
  if (auto w = waiting_.find(key); w != waiting_.end()) {
    by_time_.erase({w->second, key});
    waiting_.erase(w);
  }
  if (processing_.count(key)) {
    dirty_.insert(key);
    return;
  }
  if (queued_.insert(key).second) {
    ready_.push_back(key);
    cv_.notify_one();
  }
}

void WorkQueue::Add(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shutting_down_) return;
  ++adds_;
  ReadyLocked(key);
}

void WorkQueue::AddAfterLocked(const std::string& key, Duration delay) {
  if (delay <= Duration::zero()) {
    ReadyLocked(key);
    return;
  }
  if (queued_.count(key) || dirty_.count(key)) return;  // already due
  const Time at = clock_.Now() + delay;
  auto w = waiting_.find(key);
  if (w != waiting_.end()) {
    if (w->second <= at) return;
    by_time_.erase({w->second, key});
    w->second = at;
  } else {
    waiting_.emplace(key, at);
  }
  by_time_.insert({at, key});
  cv_.notify_one();  // a blocked Get may now have an earlier deadline
}

void WorkQueue::AddAfter(const std::string& key, Duration delay) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shutting_down_) return;
  ++adds_;
  AddAfterLocked(key, delay);
}

void WorkQueue::AddRateLimited(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shutting_down_) return;
  ++adds_;
  ++retries_;
  const int n = ++failures_[key];
  AddAfterLocked(key, backoff_.After(n));
}

void WorkQueue::Forget(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  failures_.erase(key);
}

int WorkQueue::NumRequeues(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

void WorkQueue::PromoteLocked(Time now) {
  while (!by_time_.empty() && by_time_.begin()->first <= now) {
    const std::string key = by_time_.begin()->second;
    ReadyLocked(key);  // removes it from by_time_ and waiting_
  }
}

std::optional<std::string> WorkQueue::PopLocked() {
  if (ready_.empty()) return std::nullopt;
  std::string key = std::move(ready_.front());
  ready_.pop_front();
  queued_.erase(key);
  processing_.insert(key);
  return key;
}

std::optional<std::string> WorkQueue::Get() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!shutting_down_) {
    PromoteLocked(clock_.Now());
    if (std::optional<std::string> key = PopLocked()) return key;
    if (by_time_.empty()) {
      cv_.wait(lock);
    } else {
      // Wait until the earliest deadline as the clock sees it; an Add wakes us sooner.
      const Duration left = by_time_.begin()->first - clock_.Now();
      cv_.wait_for(lock, std::max(left, Duration(std::chrono::milliseconds(1))));
    }
  }
  return std::nullopt;
}

std::optional<std::string> WorkQueue::TryGet() {
  std::lock_guard<std::mutex> lock(mu_);
  if (shutting_down_) return std::nullopt;
  PromoteLocked(clock_.Now());
  return PopLocked();
}

void WorkQueue::Done(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  processing_.erase(key);
  if (dirty_.erase(key) > 0 && !shutting_down_) ReadyLocked(key);
}

void WorkQueue::ShutDown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutting_down_ = true;
  cv_.notify_all();
}

bool WorkQueue::shutting_down() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shutting_down_;
}

size_t WorkQueue::Len() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ready_.size();
}

size_t WorkQueue::Waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_.size();
}

std::optional<Time> WorkQueue::NextReady() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (by_time_.empty()) return std::nullopt;
  return by_time_.begin()->first;
}

}  // namespace gpuaas::controller::runtime
