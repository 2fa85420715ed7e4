// gpuaas: one binary for the server and the client commands. main() only parses flags and hands
// over to the parts (exe/server_main.cc for the server, cli/ for client commands).
#include <iostream>

#include "CLI/CLI.hpp"
#include "cli/commands.h"
#include "exe/server_main.h"

#ifndef GPUAAS_VERSION
#define GPUAAS_VERSION "v0.0.0-dev"
#endif

int main(int argc, char** argv) {
  CLI::App app{"gpuaas: a GPU-as-a-Service control plane (fleet, pools, MIG, monitoring, billing)"};
  app.require_subcommand(1);
  app.set_version_flag("--client-version", GPUAAS_VERSION);

  gpuaas::cli::ClientOptions client;
  if (const char* env = std::getenv("GPUAAS_SERVER")) client.server = env;
  auto add_client_flags = [&](CLI::App* cmd, bool with_output) {
    cmd->add_option("--server,-s", client.server, "gpuaas server URL (env GPUAAS_SERVER)")
        ->capture_default_str();
    if (with_output) {
      cmd->add_option("-o,--output", client.output, "output format: table, json or yaml")
          ->capture_default_str();
    }
  };

  gpuaas::exe::ServerFlags sf;
  CLI::App* server = app.add_subcommand("server", "run the gpuaas server");
  server->add_option("--listen", sf.listen, "HOST:PORT to serve the API on")->capture_default_str();
  server->add_option("--db", sf.db, "store URL: sqlite:PATH or sqlite::memory:")->capture_default_str();
  server->add_flag("--demo", sf.demo, "simulate the demo fleet (2 clusters, 18 nodes, 144 GPUs)");
  server->add_option("--fleet", sf.fleet_file, "simulate the fleet described in a YAML/JSON file");
  server->add_option("--synthetic-gpus", sf.synthetic_gpus,
                     "simulate a uniform fleet of about N GPUs (benchmarks)");
  server->add_option("--sync-interval", sf.sync_interval_s, "seconds between inventory syncs")
      ->capture_default_str();
  server->add_option("--threads", sf.threads, "HTTP I/O threads (0: one per core)")
      ->capture_default_str();
  server->add_flag("--allow-insecure-remote", sf.allow_remote,
                   "allow listening on a non-loopback address without TLS");
  server->add_option("--log-level", sf.log_level, "debug, info, warn, error or off")
      ->capture_default_str();

  std::string what, name;
  CLI::App* get = app.add_subcommand("get", "list or show fleet objects");
  get->add_option("resource", what, "clusters, nodes, gpus or specs")->required();
  get->add_option("name", name, "one object's name");
  get->add_option("-l,--selector", client.selector, "label selector, e.g. gpuaas.io/cluster=alpha");
  add_client_flags(get, true);

  CLI::App* summary = app.add_subcommand("summary", "the fleet at a glance");
  add_client_flags(summary, true);

  CLI::App* catalog = app.add_subcommand("catalog", "the built-in GPU catalogue");
  catalog->require_subcommand(1);
  std::string catalog_output = "table";
  CLI::App* models = catalog->add_subcommand("models", "GPU models and their MIG profiles");
  models->add_option("-o,--output", catalog_output, "table, json or yaml")->capture_default_str();
  std::string model;
  CLI::App* layouts = catalog->add_subcommand("layouts", "every maximal legal MIG layout of a model");
  layouts->add_option("model", model, "catalogue model name, e.g. H200-SXM-141GB")->required();

  CLI::App* version = app.add_subcommand("version", "client and server versions");
  add_client_flags(version, false);

  CLI11_PARSE(app, argc, argv);

  if (server->parsed()) return gpuaas::exe::RunServer(sf, GPUAAS_VERSION);
  if (get->parsed()) return gpuaas::cli::Get(client, what, name, std::cout, std::cerr);
  if (summary->parsed()) return gpuaas::cli::Summary(client, std::cout, std::cerr);
  if (models->parsed()) return gpuaas::cli::CatalogModels(catalog_output, std::cout, std::cerr);
  if (layouts->parsed()) return gpuaas::cli::CatalogLayouts(model, std::cout, std::cerr);
  if (version->parsed()) return gpuaas::cli::Version(client, GPUAAS_VERSION, std::cout, std::cerr);
  return 2;
}
