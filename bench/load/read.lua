-- wrk: GETs of one path (wrk's URL) with the bench's bearer token (env GPUAAS_TOKEN).
wrk.headers["Authorization"] = "Bearer " .. os.getenv("GPUAAS_TOKEN")
