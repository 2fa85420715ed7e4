#include "telemetry/remote_write.h"

#include <atomic>
#include <map>
#include <set>
#include <thread>

#include "gtest/gtest.h"
#include "telemetry/hub.h"

namespace gpuaas::telemetry {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kNowMs = 1'800'000'000'000;

std::shared_ptr<const LabelSet> Labels(LabelSet l) { return std::make_shared<const LabelSet>(std::move(l)); }

// Power samples of one series at these timestamps, each valued as its timestamp.
std::vector<QueuedSample> Batch(const std::shared_ptr<const LabelSet>& l, std::initializer_list<int64_t> ts) {
  std::vector<QueuedSample> out;
  for (int64_t t : ts) out.push_back({l, Field::kPowerW, t, static_cast<double>(t)});
  return out;
}

// A receiver played in memory: answers each POST with the next status of a script (the last
// one repeats) and keeps the bodies it answered 2xx.
class Receiver {
 public:
  explicit Receiver(std::vector<int> statuses) : statuses_(std::move(statuses)) {}
  PostFn Fn() {
    return [this](const std::string& body) {
      std::lock_guard<std::mutex> l(mu_);
      const int status = statuses_[std::min(calls_, statuses_.size() - 1)];
      ++calls_;
      if (status >= 200 && status < 300) {
        absl::StatusOr<std::vector<DecodedSeries>> d = DecodeWriteRequest(body);
        EXPECT_TRUE(d.ok()) << d.status();
        if (d.ok()) accepted_.insert(accepted_.end(), d->begin(), d->end());
      }
      return PostResult{status, status == 0 ? "connection refused" : "", std::nullopt};
    };
  }
  size_t calls() {
    std::lock_guard<std::mutex> l(mu_);
    return calls_;
  }
  std::vector<DecodedSeries> accepted() {
    std::lock_guard<std::mutex> l(mu_);
    return accepted_;
  }

 private:
  std::mutex mu_;
  std::vector<int> statuses_;
  size_t calls_ = 0;
  std::vector<DecodedSeries> accepted_;
};

RemoteWriteOptions Fast() {
  RemoteWriteOptions o;
  o.url = "http://receiver/api/v1/write";
  o.max_samples_per_send = 4;
  o.batch_deadline = 20ms;
  o.min_backoff = 1ms;
  o.max_backoff = 4ms;
  return o;
}

TEST(RemoteWrite, EncodesAWriteRequestPerSeriesInOrder) {
  auto a = Labels({{"gpu", "GPU-a"}});
  auto b = Labels({{"gpu", "GPU-b"}});
  const std::vector<QueuedSample> in = {{a, Field::kPowerW, 1000, 1.5}, {b, Field::kPowerW, 1000, 2},
                                        {a, Field::kTempC, 1000, 40},   {a, Field::kPowerW, 2000, 3.25},
                                        {b, Field::kPowerW, 2000, -0.0}};
  const std::string body = EncodeWriteRequest(in);
  absl::StatusOr<std::vector<DecodedSeries>> out = DecodeWriteRequest(body);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);  // a's power, b's power, a's temperature: series are (device, field)
  EXPECT_EQ((*out)[0].labels, (LabelSet{{"__name__", "gpuaas_power_w"}, {"gpu", "GPU-a"}}));
  EXPECT_EQ((*out)[0].samples, (std::vector<std::pair<int64_t, double>>{{1000, 1.5}, {2000, 3.25}}));
  EXPECT_EQ((*out)[1].labels, (LabelSet{{"__name__", "gpuaas_power_w"}, {"gpu", "GPU-b"}}));
  EXPECT_EQ((*out)[1].samples.size(), 2u);
  EXPECT_EQ((*out)[2].labels, (LabelSet{{"__name__", "gpuaas_temp_c"}, {"gpu", "GPU-a"}}));
  // Not a snappy block, or snappy around something else: refused with a reason.
  EXPECT_FALSE(DecodeWriteRequest("not snappy").ok());
  const auto headers = RemoteWriteHeaders("gpuaas/1.0");
  EXPECT_EQ(headers.size(), 4u);
  EXPECT_EQ(headers[0], (std::pair<std::string, std::string>{"Content-Encoding", "snappy"}));
  EXPECT_EQ(headers[3].first, "X-Prometheus-Remote-Write-Version");
  EXPECT_EQ(headers[3].second, "0.1.0");
}

TEST(RemoteWrite, LabelsNameTheOwnerAndDropEmptyValues) {
  GpuLabels g{"c1", "node-1", "H200-SXM-141GB", {"team-a", "train", ""}, {}};
  g.instances.push_back({0, "MIG-0", "3g.71gb", {"team-b", "infer", "server-1"}});
  g.instances.push_back({4, "", "3g.71gb", {}});
  const LabelSet whole = DeviceLabels("GPU-a", &g, nullptr);
  EXPECT_EQ(whole, (LabelSet{{"cluster", "c1"},
                             {"gpu", "GPU-a"},
                             {"model", "H200-SXM-141GB"},
                             {"node", "node-1"},
                             {"pool", "train"},
                             {"project", "team-a"}}));  // no workload: empty values are dropped
  // A MIG instance, found by its UUID (its placement start is not known to the hub).
  InstanceInfo by_uuid{3, "3g.71gb", -1, "MIG-0"};
  const LabelSet mig = DeviceLabels("GPU-a/3", &g, &by_uuid);
  EXPECT_EQ(mig, (LabelSet{{"cluster", "c1"},
                           {"gpu", "GPU-a"},
                           {"mig_instance", "3"},
                           {"mig_profile", "3g.71gb"},
                           {"model", "H200-SXM-141GB"},
                           {"node", "node-1"},
                           {"pool", "infer"},
                           {"project", "team-b"},
                           {"workload", "server-1"}}));
  // By placement start; this one belongs to nobody.
  InstanceInfo by_start{5, "", 4, ""};
  const LabelSet free = DeviceLabels("GPU-a/5", &g, &by_start);
  EXPECT_EQ(free.size(), 6u);
  EXPECT_EQ(free[3], (std::pair<std::string, std::string>{"mig_profile", "3g.71gb"}));
  // A GPU the inventory does not know: its name and UUID only.
  EXPECT_EQ(DeviceLabels("GPU-z", nullptr, nullptr), (LabelSet{{"gpu", "GPU-z"}}));
  EXPECT_EQ(MetricName(Field::kTempC), "gpuaas_temp_c");
}

TEST(RemoteWrite, RetriesServerErrorsAndNoAnswerButDropsARefusal) {
  auto l = Labels({{"gpu", "GPU-x"}});
  {
    Receiver rx({503, 0, 429, 204});
    RemoteWriteQueue q(Fast(), rx.Fn());
    q.Start();
    std::vector<QueuedSample> s = Batch(l, {1, 2, 3, 4});
    q.Enqueue(s);
    ASSERT_TRUE(q.WaitSent(5s));
    const RemoteWriteStats st = q.stats();
    EXPECT_EQ(rx.calls(), 4u);
    EXPECT_EQ(st.samples_total, 4);
    EXPECT_EQ(st.samples_retried, 12);
    EXPECT_EQ(st.samples_failed, 0);
    EXPECT_EQ(st.highest_sent_ms, 4);
    ASSERT_EQ(rx.accepted().size(), 1u);
    EXPECT_EQ(rx.accepted()[0].samples.size(), 4u);  // once: the failed tries stored nothing
  }
  {
    Receiver rx({400, 204});
    RemoteWriteQueue q(Fast(), rx.Fn());
    q.Start();
    std::vector<QueuedSample> s = Batch(l, {1, 2, 3, 4, 5});
    q.Enqueue(s);
    ASSERT_TRUE(q.WaitSent(5s));
    const RemoteWriteStats st = q.stats();
    EXPECT_EQ(rx.calls(), 2u);  // the refused batch is not sent again
    EXPECT_EQ(st.samples_failed, 4);
    EXPECT_EQ(st.samples_total, 1);
    EXPECT_EQ(st.samples_retried, 0);
    EXPECT_NE(st.last_error.find("400"), std::string::npos);
  }
}

TEST(RemoteWrite, AFullQueueDropsAndCountsWhatDoesNotFit) {
  auto l = Labels({{"gpu", "GPU-x"}});
  Receiver rx({0});  // the receiver is down
  RemoteWriteOptions o = Fast();
  o.capacity = 10;
  RemoteWriteQueue q(o, rx.Fn());
  std::vector<QueuedSample> s;
  for (int i = 0; i < 25; ++i) s.push_back({l, Field::kPowerW, i, static_cast<double>(i)});
  q.Enqueue(s);
  RemoteWriteStats st = q.stats();
  EXPECT_EQ(st.samples_dropped, 15);
  EXPECT_EQ(st.samples_pending, 10);
  EXPECT_EQ(st.highest_enqueued_ms, 9);  // the first ten were kept, in order
  // Started, the receiver still down: stopping does not wait for it; what was left is failed.
  q.Start();
  std::this_thread::sleep_for(30ms);
  q.Stop();
  st = q.stats();
  EXPECT_EQ(st.samples_total, 0);
  EXPECT_EQ(st.samples_failed + st.samples_dropped, 25);
}

TEST(RemoteWrite, ABatchLeavesWhenFullOrWhenItsOldestSampleHasWaited) {
  auto l = Labels({{"gpu", "GPU-x"}});
  Receiver rx({200});
  RemoteWriteOptions o = Fast();
  o.batch_deadline = 300ms;
  RemoteWriteQueue q(o, rx.Fn());
  q.Start();
  std::vector<QueuedSample> s = Batch(l, {1, 2, 3, 4, 5});
  q.Enqueue(s);
  // Four go at once (a full batch); the fifth waits for the deadline.
  for (int i = 0; i < 100 && rx.calls() < 1; ++i) std::this_thread::sleep_for(2ms);
  EXPECT_EQ(rx.calls(), 1u);
  EXPECT_EQ(q.stats().samples_pending, 1);
  ASSERT_TRUE(q.WaitSent(5s));
  EXPECT_EQ(rx.calls(), 2u);
  EXPECT_EQ(q.stats().samples_total, 5);
  // A lone sample into an idle queue leaves at its deadline too.
  std::vector<QueuedSample> one = Batch(l, {6});
  q.Enqueue(one);
  ASSERT_TRUE(q.WaitSent(5s));
  EXPECT_EQ(rx.calls(), 3u);
  EXPECT_EQ(q.stats().highest_sent_ms, 6);
}

TEST(RemoteWrite, TheHubsStoredSamplesLeaveLabelledAndAreRelabelledWhenAPoolChanges) {
  Hub hub;
  hub.SetKnownGpus({"GPU-a"});
  DeviceDirectory dir;
  dir.Set("GPU-a", GpuLabels{"c1", "n1", "H200-SXM-141GB", {}, {}});
  RemoteWrite rw(hub, dir);
  Receiver rx({204});
  RemoteWriteOptions o = Fast();
  o.max_samples_per_send = 1000;
  rw.Add(o, [&rx] { return rx.Fn(); });
  hub.SetSink([&rw](std::span<const Sample> s) { rw.Take(s); });
  rw.Start();
  const std::string text =
      "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-a\",GPU_I_PROFILE=\"3g.71gb\",GPU_I_ID=\"1\"} 400\n"
      "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-a\",GPU_I_PROFILE=\"3g.71gb\",GPU_I_ID=\"2\"} 400\n"
      "DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\",UUID=\"GPU-a\",GPU_I_PROFILE=\"3g.71gb\",GPU_I_ID=\"1\"} 0.5\n";
  ASSERT_TRUE(hub.IngestText(text, kNowMs).ok());
  ASSERT_TRUE(hub.IngestText(text, kNowMs).ok());  // the same again: nothing new is stored or sent
  ASSERT_TRUE(rw.receivers()[0]->WaitSent(5s));
  // Series leave from their shards in no set order: found by name (and, later, by time).
  auto find = [&rx](std::string_view name, int64_t t_ms) {
    for (const DecodedSeries& d : rx.accepted()) {
      if (d.labels[0].second == name && d.samples.front().first == t_ms) return d;
    }
    return DecodedSeries{};
  };
  ASSERT_EQ(rx.accepted().size(), 2u);  // power once for the GPU, SM activity of instance 1
  EXPECT_EQ(find("gpuaas_power_w", kNowMs).samples, (std::vector<std::pair<int64_t, double>>{{kNowMs, 400}}));
  EXPECT_EQ(find("gpuaas_sm_active", kNowMs).labels, (LabelSet{{"__name__", "gpuaas_sm_active"},
                                     {"cluster", "c1"},
                                     {"gpu", "GPU-a"},
                                     {"mig_instance", "1"},
                                     {"mig_profile", "3g.71gb"},
                                     {"model", "H200-SXM-141GB"},
                                     {"node", "n1"}}));
  // The instance goes to a pool: the inventory names it by placement start, which the hub
  // learns from an agent's report of the same GPU. The next sample carries the pool.
  GpuLabels g{"c1", "n1", "H200-SXM-141GB", {}, {}};
  g.instances.push_back({0, "", "3g.71gb", {"team-a", "p1", ""}});
  dir.Set("GPU-a", g);
  NodeReport rep;
  rep.node = "n1";
  rep.time_ms = kNowMs + 15'000;
  GpuReport gr;
  gr.uuid = "GPU-a";
  gr.mig_enabled = true;
  gr.instances.push_back({1, "3g.71gb", 0, 4, "MIG-1", {{Field::kSmActive, 0.75}}});
  rep.gpus.push_back(gr);
  ASSERT_TRUE(hub.IngestReport(rep, kNowMs + 15'000).ok());
  ASSERT_TRUE(rw.receivers()[0]->WaitSent(5s));
  ASSERT_EQ(rx.accepted().size(), 3u);
  const DecodedSeries relabelled = find("gpuaas_sm_active", kNowMs + 15'000);
  EXPECT_NE(std::find(relabelled.labels.begin(), relabelled.labels.end(),
                      std::pair<std::string, std::string>{"pool", "p1"}),
            relabelled.labels.end());
  EXPECT_EQ(relabelled.samples, (std::vector<std::pair<int64_t, double>>{{kNowMs + 15'000, 0.75}}));
  rw.Stop();
  hub.SetSink(nullptr);
}


// A receiver with four shards, fed by the hub: a series always goes to the same shard, so its
// samples arrive in order whichever shard sends first; the capacity is split between them.
TEST(RemoteWrite, ShardsKeepEachSeriesInOrder) {
  Hub hub;
  DeviceDirectory dir;
  RemoteWrite rw(hub, dir);
  Receiver rx({204});
  RemoteWriteOptions o = Fast();
  o.shards = 4;
  o.capacity = 4000;
  RemoteWriteReceiver& receiver = rw.Add(o, [&rx] { return rx.Fn(); });
  ASSERT_EQ(receiver.shards(), 4u);
  EXPECT_EQ(receiver.shard(0).options().capacity, 1000u);
  hub.SetSink([&rw](std::span<const Sample> s) { rw.Take(s); });
  rw.Start();
  for (int64_t t = 1; t <= 50; ++t) {
    std::string text;
    for (int g = 0; g < 16; ++g) {
      text += "DCGM_FI_DEV_POWER_USAGE{UUID=\"GPU-" + std::to_string(g) + "\"} " + std::to_string(t) + " " +
              std::to_string(kNowMs + t * 1000) + "\n";
    }
    ASSERT_TRUE(hub.IngestText(text, kNowMs + 60'000).ok());
  }
  ASSERT_TRUE(receiver.WaitSent(5s));
  EXPECT_EQ(receiver.stats().samples_total, 800);
  std::map<std::string, int64_t> last;
  std::set<size_t> busy;  // shards that sent
  for (size_t i = 0; i < receiver.shards(); ++i) {
    if (receiver.shard(i).stats().samples_total > 0) busy.insert(i);
  }
  EXPECT_GT(busy.size(), 1u);  // 16 series spread over the shards
  for (const DecodedSeries& s : rx.accepted()) {
    for (const auto& [t, v] : s.samples) {
      EXPECT_GT(t, last[s.labels[1].second]) << s.labels[1].second;
      last[s.labels[1].second] = t;
    }
  }
  EXPECT_EQ(last.size(), 16u);
  for (const auto& [gpu, t] : last) EXPECT_EQ(t, kNowMs + 50'000) << gpu;
  rw.Stop();
  hub.SetSink(nullptr);
}

}  // namespace
}  // namespace gpuaas::telemetry
