#include "test/fake_kube_apiserver.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <string>
#include <thread>

#include "httplib.h"
#include "nlohmann/json.hpp"

namespace gpuaas::testing {
namespace {

using nlohmann::json;

json StatusBody(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"}, {"apiVersion", "v1"}, {"metadata", json::object()}, {"status", "Failure"},
          {"message", message}, {"reason", reason}, {"code", code}};
}

std::string Reason(int code) {
  switch (code) {
    case 401: return "Unauthorized";
    case 404: return "NotFound";
    case 409: return "Conflict";
    case 410: return "Expired";
    case 429: return "TooManyRequests";
    default: return "InternalError";
  }
}

}  // namespace

struct FakeKubeApiServer::Impl {
  struct Event {
    int64_t rv;
    std::string path;
    std::string type;
    json object;
  };
  struct Fault {
    int status;
    int retry_after_s;
    bool pages_only;
    std::string path;  // empty: any
  };

  std::string token;
  mutable std::mutex mu;
  std::condition_variable cv;
  int64_t rv = 100;       // the last resourceVersion given out
  int64_t compacted = 0;  // events at or below this are forgotten
  std::map<std::string, std::map<std::string, json>> collections;  // path -> name -> object
  std::map<std::string, std::string> kinds;                        // path -> kind
  std::deque<Event> events;
  std::deque<Fault> faults;
  int64_t drop_generation = 0;  // DropWatches bumps it
  bool held = false;            // HoldWatches: running watches deliver nothing
  bool stopping = false;
  bool dra = false;  // ServeDra
  int bookmark_ms = 0;
  int watches = 0;
  int port = 0;
  std::vector<Request> log;
  std::vector<Write> writes;
  std::unique_ptr<httplib::Server> server;
  std::thread thread;
  std::string tls_dir;  // cert.pem, key.pem[, client-ca.pem] when serving HTTPS
  bool client_ca = false;

  void Record(int64_t version, const std::string& path, const std::string& type, json object) {
    events.push_back({version, path, type, std::move(object)});
    cv.notify_all();
  }

  // A fault to answer with, if one is queued; under mu.
  bool TakeFault(const httplib::Request& req, httplib::Response& res) {
    auto it = std::find_if(faults.begin(), faults.end(),
                           [&](const Fault& f) {
                             return (!f.pages_only || req.has_param("continue")) && (f.path.empty() || req.path == f.path);
                           });
    if (it == faults.end()) return false;
    const Fault f = *it;
    faults.erase(it);
    res.status = f.status;
    if (f.status == 429 && f.retry_after_s > 0) res.set_header("Retry-After", std::to_string(f.retry_after_s));
    res.set_content(StatusBody(f.status, Reason(f.status), "injected fault").dump(), "application/json");
    return true;
  }

  void List(const std::string& path, const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu);
    if (TakeFault(req, res)) return;
    const auto& items = collections[path];
    size_t limit = items.size();
    if (req.has_param("limit")) limit = std::max<size_t>(1, std::stoul(req.get_param_value("limit")));
    size_t offset = 0;
    std::string list_rv = std::to_string(rv);
    if (req.has_param("continue")) {
      // "<offset>/<rv>": a snapshot's page; forgotten once compacted past.
      const std::string c = req.get_param_value("continue");
      const size_t slash = c.find('/');
      offset = std::stoul(c.substr(0, slash));
      list_rv = c.substr(slash + 1);
      if (std::stoll(list_rv) <= compacted) {
        res.status = 410;
        res.set_content(StatusBody(410, "Expired", "The provided continue parameter is too old").dump(), "application/json");
        return;
      }
    }
    json out = {{"kind", kinds[path] + "List"}, {"apiVersion", "v1"}, {"metadata", {{"resourceVersion", list_rv}}},
                {"items", json::array()}};
    size_t i = 0;
    for (const auto& [name, obj] : items) {
      if (i >= offset && i < offset + limit) {
        json item = obj;
        item.erase("kind");  // as the API server sends list items
        item.erase("apiVersion");
        out["items"].push_back(std::move(item));
      }
      ++i;
    }
    if (offset + limit < items.size()) out["metadata"]["continue"] = std::to_string(offset + limit) + "/" + list_rv;
    res.set_content(out.dump(), "application/json");
  }

  // Stores `obj` at a new version under collection `path`; under mu.
  json Store(const std::string& path, json obj, const std::string& kind) {
    const std::string name = obj["metadata"]["name"].get<std::string>();
    obj["kind"] = kind;
    obj["apiVersion"] = "v1";
    obj["metadata"]["resourceVersion"] = std::to_string(++rv);
    const bool existed = collections[path].count(name) > 0;
    collections[path][name] = obj;
    if (kinds[path].empty()) kinds[path] = kind;
    Record(rv, path, existed ? "MODIFIED" : "ADDED", obj);
    return obj;
  }

  static std::string KindOf(const std::string& path) {
    if (path.ends_with("/configmaps")) return "ConfigMap";
    if (path.ends_with("/nodes")) return "Node";
    if (path.ends_with("/pods")) return "Pod";
    if (path.ends_with("/resourceslices")) return "ResourceSlice";
    if (path.ends_with("/devicetaintrules")) return "DeviceTaintRule";
    return "Object";
  }

  void Fail(httplib::Response& res, int code, const std::string& message) {
    res.status = code;
    res.set_content(StatusBody(code, Reason(code), message).dump(), "application/json");
  }

  // Pods are kept in one collection, /api/v1/pods, as tests put them and the driver lists them:
  // a pod's own path (/api/v1/namespaces/NS/pods/NAME) is found there, in its namespace.
  static constexpr std::string_view kPods = "/api/v1/pods";
  static std::string PodNamespace(const std::string& path) {
    static const std::regex pods(R"(/api/v1/namespaces/([a-z0-9-]+)/pods)");
    std::smatch m;
    return std::regex_match(path, m, pods) ? m[1].str() : "";
  }
  // The object `name` of collection `path` (a pod by its own path too), or end().
  std::map<std::string, json>::iterator Find(std::string& path, const std::string& name) {
    const std::string ns = PodNamespace(path);
    if (!ns.empty()) path = std::string(kPods);
    auto it = collections[path].find(name);
    if (it != collections[path].end() && !ns.empty() && it->second["metadata"].value("namespace", "") != ns) {
      return collections[path].end();
    }
    return it;
  }

  void One(const httplib::Request& req, httplib::Response& res) {
    std::string path = req.matches[1].str();
    const std::string name = req.matches[2].str();
    std::lock_guard<std::mutex> lock(mu);
    if (TakeFault(req, res)) return;
    auto it = Find(path, name);
    if (it == collections[path].end()) return Fail(res, 404, KindOf(path) + " \"" + name + "\" not found");
    if (req.method == "GET") {
      res.set_content(it->second.dump(), "application/json");
      return;
    }
    writes.push_back({req.method, req.path, req.body});
    json body = json::parse(req.body, nullptr, false);
    if (!body.is_object()) return Fail(res, 400, "not JSON");
    json obj;
    if (req.method == "PUT") {
      if (body["metadata"].value("resourceVersion", "") != it->second["metadata"]["resourceVersion"]) {
        return Fail(res, 409, "the object has been modified; please apply your changes to the latest version");
      }
      obj = body;
    } else {  // PATCH, a JSON merge patch (RFC 7386)
      if (req.get_header_value("Content-Type") != "application/merge-patch+json") return Fail(res, 415, "unsupported patch");
      // A patch that names a resourceVersion applies to that version only, as the API server's.
      const std::string at = body.contains("metadata") && body["metadata"].is_object()
                                 ? body["metadata"].value("resourceVersion", "")
                                 : "";
      if (!at.empty() && at != it->second["metadata"].value("resourceVersion", "")) {
        return Fail(res, 409, "the object has been modified; please apply your changes to the latest version");
      }
      obj = it->second;
      obj.merge_patch(body);
    }
    obj["metadata"]["name"] = name;
    res.set_content(Store(path, obj, it->second.value("kind", KindOf(path))).dump(), "application/json");
  }

  void Create(const httplib::Request& req, httplib::Response& res) {
    const std::string path = req.matches[1].str();
    std::lock_guard<std::mutex> lock(mu);
    if (TakeFault(req, res)) return;
    writes.push_back({req.method, req.path, req.body});
    json body = json::parse(req.body, nullptr, false);
    if (!body.is_object() || !body["metadata"].is_object() || !body["metadata"]["name"].is_string()) {
      return Fail(res, 400, "no metadata.name");
    }
    if (collections[path].count(body["metadata"]["name"].get<std::string>())) return Fail(res, 409, "already exists");
    res.status = 201;
    res.set_content(Store(path, body, KindOf(path)).dump(), "application/json");
  }

  void Remove(const httplib::Request& req, httplib::Response& res) {
    std::string path = req.matches[1].str();
    const std::string name = req.matches[2].str();
    std::lock_guard<std::mutex> lock(mu);
    if (TakeFault(req, res)) return;
    writes.push_back({req.method, req.path, req.body});
    auto it = Find(path, name);
    if (it == collections[path].end()) return Fail(res, 404, KindOf(path) + " \"" + name + "\" not found");
    json obj = it->second;
    // An object with finalizers stays, marked deleted, until they are removed (as the API
    // server's); the grace period asked for is kept beside the mark.
    const json& finalizers = obj["metadata"].contains("finalizers") ? obj["metadata"]["finalizers"] : json();
    if (finalizers.is_array() && !finalizers.empty()) {
      const json options = json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
      if (!obj["metadata"].contains("deletionTimestamp")) obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
      obj["metadata"]["deletionGracePeriodSeconds"] =
          options.is_object() ? options.value("gracePeriodSeconds", int64_t{30}) : int64_t{30};
      res.set_content(Store(path, obj, it->second.value("kind", KindOf(path))).dump(), "application/json");
      return;
    }
    collections[path].erase(it);
    obj["metadata"]["resourceVersion"] = std::to_string(++rv);
    Record(rv, path, "DELETED", obj);
    res.set_content(obj.dump(), "application/json");
  }

  void Watch(const std::string& path, const httplib::Request& req, httplib::Response& res) {
    std::unique_lock<std::mutex> lock(mu);
    if (TakeFault(req, res)) return;
    int64_t from = req.has_param("resourceVersion") ? std::stoll(req.get_param_value("resourceVersion")) : rv;
    const bool bookmarks = req.get_param_value("allowWatchBookmarks") == "true";
    const int timeout_s = req.has_param("timeoutSeconds") ? std::stoi(req.get_param_value("timeoutSeconds")) : 300;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    const int64_t generation = drop_generation;
    bool expired = from < compacted;
    ++watches;
    lock.unlock();
    auto last_bookmark = std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
    auto cursor = std::make_shared<int64_t>(from);
    res.set_chunked_content_provider(
        "application/json",
        [this, path, bookmarks, deadline, generation, expired, last_bookmark, cursor](size_t, httplib::DataSink& sink) {
          std::unique_lock<std::mutex> l(mu);
          if (expired) {
            const std::string line =
                json{{"type", "ERROR"}, {"object", StatusBody(410, "Expired", "too old resource version")}}.dump() + "\n";
            l.unlock();
            sink.write(line.data(), line.size());
            sink.done();
            return true;
          }
          cv.wait_for(l, std::chrono::milliseconds(50));
          if (stopping || drop_generation != generation) return false;  // cut: no last chunk
          if (held) return true;
          std::string out;
          for (const Event& e : events) {
            if (e.rv <= *cursor || e.path != path) continue;
            out += json{{"type", e.type}, {"object", e.object}}.dump() + "\n";
            *cursor = e.rv;
          }
          // Events of other collections still move this watch's version on.
          if (!events.empty()) *cursor = std::max(*cursor, events.back().rv);
          const auto now = std::chrono::steady_clock::now();
          if (bookmarks && bookmark_ms > 0 && now - *last_bookmark > std::chrono::milliseconds(bookmark_ms)) {
            out += json{{"type", "BOOKMARK"},
                        {"object", {{"kind", kinds[path]}, {"apiVersion", "v1"},
                                    {"metadata", {{"resourceVersion", std::to_string(*cursor)}}}}}}
                       .dump() +
                   "\n";
            *last_bookmark = now;
          }
          l.unlock();
          if (!out.empty() && !sink.write(out.data(), out.size())) return false;
          if (now >= deadline) sink.done();
          return true;
        },
        [this](bool) {
          std::lock_guard<std::mutex> l(mu);
          --watches;
        });
  }
};

FakeKubeApiServer::FakeKubeApiServer(std::string token) : impl_(std::make_unique<Impl>()) {
  impl_->token = std::move(token);
}

FakeKubeApiServer::~FakeKubeApiServer() {
  Stop();
  if (!impl_->tls_dir.empty()) std::filesystem::remove_all(impl_->tls_dir);
}

void FakeKubeApiServer::ServeDra(bool on) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->dra = on;
}

void FakeKubeApiServer::Start() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.stopping = false;
  }
  if (m.tls_dir.empty()) {
    m.server = std::make_unique<httplib::Server>();
  } else {
    const std::string ca = m.tls_dir + "/client-ca.pem";
    m.server = std::make_unique<httplib::SSLServer>((m.tls_dir + "/cert.pem").c_str(), (m.tls_dir + "/key.pem").c_str(),
                                                    m.client_ca ? ca.c_str() : nullptr);
  }
  m.server->set_pre_routing_handler([&m](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(m.mu);
    m.log.push_back({req.method, req.target, req.get_param_value("watch") == "1"});
    if (!m.token.empty() && req.get_header_value("Authorization") != "Bearer " + m.token) {
      res.status = 401;
      res.set_content(StatusBody(401, "Unauthorized", "Unauthorized").dump(), "application/json");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  auto collection = [&m](const std::string& path, const httplib::Request& req, httplib::Response& res) {
    if (req.get_param_value("watch") == "1") {
      m.Watch(path, req, res);
    } else {
      m.List(path, req, res);
    }
  };
  m.server->Get(R"(/api/v1/([a-z]+))", [collection](const httplib::Request& req, httplib::Response& res) {
    collection("/api/v1/" + req.matches[1].str(), req, res);
  });
  m.server->Get(R"(/api/v1/namespaces/([a-z0-9-]+)/([a-z]+))",
                [collection](const httplib::Request& req, httplib::Response& res) {
                  collection("/api/v1/namespaces/" + req.matches[1].str() + "/" + req.matches[2].str(), req, res);
                });
  // DRA's ResourceSlices, where the server is told to serve them (Kubernetes 1.34 and later); a
  // server that does not answers 404, as an older API server does.
  m.server->Get(R"(/apis/resource\.k8s\.io/v1/(resourceslices|resourceclaims))", [&m, collection](const httplib::Request& req,
                                                                                                httplib::Response& res) {
    bool dra;
    {
      std::lock_guard<std::mutex> lock(m.mu);
      dra = m.dra;
    }
    if (!dra) {
      std::lock_guard<std::mutex> lock(m.mu);
      return m.Fail(res, 404, "the server could not find the requested resource");
    }
    collection("/apis/resource.k8s.io/v1/" + req.matches[1].str(), req, res);
  });
  // DRA's DeviceTaintRules (resource.k8s.io/v1beta2, cluster-scoped), where DRA is served.
  const std::string rules = R"((/apis/resource\.k8s\.io/v1beta2/devicetaintrules))";
  auto dra_only = [&m](httplib::Response& res) {
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.dra) return false;
    m.Fail(res, 404, "the server could not find the requested resource");
    return true;
  };
  m.server->Get(rules, [&m, dra_only](const httplib::Request& req, httplib::Response& res) {
    if (!dra_only(res)) m.List(std::string(kDeviceTaintRulesPath), req, res);
  });
  m.server->Post(rules, [&m, dra_only](const httplib::Request& req, httplib::Response& res) {
    if (!dra_only(res)) m.Create(req, res);
  });
  m.server->Delete(R"((/apis/resource\.k8s\.io/v1beta2/devicetaintrules)/([a-z0-9.-]+))",
                   [&m, dra_only](const httplib::Request& req, httplib::Response& res) {
                     if (!dra_only(res)) m.Remove(req, res);
                   });
  // One object: /api/v1/nodes/NAME, /api/v1/namespaces/NS/configmaps/NAME.
  const std::string object = R"((/api/v1/(?:namespaces/[a-z0-9-]+/)?[a-z]+)/([a-z0-9.-]+))";
  m.server->Get(object, [&m](const httplib::Request& req, httplib::Response& res) { m.One(req, res); });
  m.server->Put(object, [&m](const httplib::Request& req, httplib::Response& res) { m.One(req, res); });
  m.server->Patch(object, [&m](const httplib::Request& req, httplib::Response& res) { m.One(req, res); });
  m.server->Delete(R"((/api/v1/namespaces/[a-z0-9-]+/pods)/([a-z0-9.-]+))",
                   [&m](const httplib::Request& req, httplib::Response& res) { m.Remove(req, res); });
  m.server->Post(R"((/api/v1/(?:namespaces/[a-z0-9-]+/)?[a-z]+))",
                 [&m](const httplib::Request& req, httplib::Response& res) { m.Create(req, res); });
  if (m.port == 0) {
    m.port = m.server->bind_to_any_port("127.0.0.1");
  } else {
    // The same port again, as a restarted API server has; the old socket may linger briefly.
    for (int i = 0; i < 100 && !m.server->bind_to_port("127.0.0.1", m.port); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  m.thread = std::thread([&m] { m.server->listen_after_bind(); });
  // Listening before Start returns: a Stop that came first would not stop it.
  for (int i = 0; i < 1000 && !m.server->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

void FakeKubeApiServer::Stop() {
  Impl& m = *impl_;
  if (!m.server) return;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.stopping = true;
  }
  m.cv.notify_all();
  m.server->stop();
  if (m.thread.joinable()) m.thread.join();
  m.server.reset();
}

int FakeKubeApiServer::port() const { return impl_->port; }
std::string FakeKubeApiServer::url() const {
  return (impl_->tls_dir.empty() ? "http://127.0.0.1:" : "https://127.0.0.1:") + std::to_string(impl_->port);
}

void FakeKubeApiServer::UseTls(const std::string& cert_pem, const std::string& key_pem, const std::string& client_ca_pem) {
  char tmpl[] = "/tmp/gpuaas-fake-kube-XXXXXX";
  impl_->tls_dir = mkdtemp(tmpl);
  std::ofstream(impl_->tls_dir + "/cert.pem") << cert_pem;
  std::ofstream(impl_->tls_dir + "/key.pem") << key_pem;
  impl_->client_ca = !client_ca_pem.empty();
  if (impl_->client_ca) std::ofstream(impl_->tls_dir + "/client-ca.pem") << client_ca_pem;
}

void FakeKubeApiServer::Put(const std::string& path, const std::string& kind, const std::string& object_json) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  m.kinds[path] = kind;
  m.Store(path, json::parse(object_json), kind);
}

std::vector<FakeKubeApiServer::Write> FakeKubeApiServer::writes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->writes;
}

std::string FakeKubeApiServer::Get(const std::string& path, const std::string& name) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto c = impl_->collections.find(path);
  if (c == impl_->collections.end()) return "";
  auto it = c->second.find(name);
  return it == c->second.end() ? "" : it->second.dump();
}

void FakeKubeApiServer::Delete(const std::string& path, const std::string& name) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  auto it = m.collections[path].find(name);
  if (it == m.collections[path].end()) return;
  json obj = it->second;
  m.collections[path].erase(it);
  obj["metadata"]["resourceVersion"] = std::to_string(++m.rv);
  m.Record(m.rv, path, "DELETED", obj);
}

void FakeKubeApiServer::Compact() {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  m.compacted = m.rv;
  m.events.clear();
}

std::string FakeKubeApiServer::resource_version() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return std::to_string(impl_->rv);
}

void FakeKubeApiServer::FailNext(int status, int count, int retry_after_s, const std::string& path) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (int i = 0; i < count; ++i) impl_->faults.push_back({status, retry_after_s, false, path});
}

void FakeKubeApiServer::FailNextPage(int status, int count) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  for (int i = 0; i < count; ++i) impl_->faults.push_back({status, 0, true, ""});
}

void FakeKubeApiServer::SetToken(const std::string& token) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->token = token;
}

void FakeKubeApiServer::HoldWatches() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->held = true;
}

void FakeKubeApiServer::DropWatches() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  ++impl_->drop_generation;
  impl_->held = false;
  impl_->cv.notify_all();
}

void FakeKubeApiServer::SetBookmarkInterval(int ms) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->bookmark_ms = ms;
}

std::vector<FakeKubeApiServer::Request> FakeKubeApiServer::requests() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->log;
}

int FakeKubeApiServer::running_watches() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->watches;
}

}  // namespace gpuaas::testing
