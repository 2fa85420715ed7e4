-- wrk: the pool lifecycle as fast as the server takes it. Each connection requests a pool (one
-- whole GPU of BENCH_MODEL), approves it once created, and releases it once approved; the
-- answers say which pool came back (its name is the first "name" in the body), so each thread
-- keeps a queue of next steps. Non-2xx answers are counted by wrk.
local token = os.getenv("GPUAAS_TOKEN")
local model = os.getenv("BENCH_MODEL") or "H100-SXM5-80GB"
local base = "/apis/gpuaas.io/v1/namespaces/bench/gpupools"
-- Names are unique across wrk processes (BENCH_PREFIX, set per process by the bench) and threads
-- (`thread_id`, set by setup in each thread's own state).
local prefix = os.getenv("BENCH_PREFIX") or "0"
local counter = 0
local queue = {}
local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("thread_id", threads)
end

function init(args)
  wrk.headers["Authorization"] = "Bearer " .. token
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  local step = table.remove(queue, 1)
  if step then
    if step.kind == "approve" then
      return wrk.format("PUT", base .. "/" .. step.name .. "/approval", nil, '{"approve":true,"reason":"load"}')
    end
    return wrk.format("POST", base .. "/" .. step.name .. "/release", nil, "")
  end
  counter = counter + 1
  local name = string.format("load-%s-%d-%d", prefix, thread_id or 0, counter)
  local body = string.format(
    '{"apiVersion":"gpuaas.io/v1","kind":"GpuPool","metadata":{"name":"%s","namespace":"bench"},' ..
      '"spec":{"items":[{"model":"%s","profile":"full","count":1}]}}', name, model)
  return wrk.format("POST", base, nil, body)
end

function response(status, headers, body)
  local name = string.match(body, '"name":"(load%-[%w%-]+)"')
  if not name then return end
  if status == 201 then
    table.insert(queue, {kind = "approve", name = name})
  elseif status == 200 and string.find(body, '"approved":true', 1, true) and
    not string.find(body, '"type":"Released"', 1, true) then
    table.insert(queue, {kind = "release", name = name})
  end
end
