// tarnn info: a model's config, parameter count and state bytes per image (a softmax model's
// KV cache, at the last position); with --device, the device a run there would use.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "options.h"

namespace tarnn::cli {

namespace {

struct InfoArgs {
  std::string model, device; // device: none, or the one to name
  Report report;
};

int run_info(const InfoArgs &a) {
  RunOptions run; // --device checked before the model is read
  if (!a.device.empty())
    run.device = as_usage([&] { return parse_device(a.device); });
  const std::string path = find_model(a.model);
  const Model m = load_model(path);
  const Config &cfg = m.config;
  const int64_t per_image = memory_bytes_per_image(cfg, StateFormat::Fp32);
  char memory[256];
  if (keeps_kv_cache(cfg)) // softmax: keys and values of every earlier position
    std::snprintf(memory, sizeof memory,
                  "KV cache/image  %lld bytes at the last position, %lld per position (K and V of "
                  "every layer and head, fp32; grows with the position)",
                  static_cast<long long>(per_image),
                  static_cast<long long>(per_image / std::max(1, cfg.positions())));
  else
    std::snprintf(memory, sizeof memory,
                  "state per image %lld bytes (S and z of every layer and head, %s; constant in "
                  "the position)",
                  static_cast<long long>(per_image), name(StateFormat::Fp32));
  // linear: its feature map, and S's shape when not square
  std::string attention = attention_name(cfg.attention);
  if (cfg.attention == Attention::Linear) {
    attention += std::string(", feature map ") + feature_map_name(cfg.feature_map.kind);
    if (cfg.features() != cfg.d_head)
      attention += " (S is " + std::to_string(cfg.features()) + " x " + std::to_string(cfg.d_head) +
                   " a head)";
  }
  char text[2048];
  std::snprintf(text, sizeof text,
                "model           %s\n"
                "image           %dx%d, %s: %d bytes, %d positions\n"
                "layers          %d x (%d heads of %d), d_model %d, d_ff %d, %s\n"
                "output          %d logistics (%d values)\n"
                "attention       %s\n"
                "parameters      %lld (positional table included)\n"
                "%s\n",
                path.c_str(), cfg.height, cfg.width,
                count_of(cfg.channels, "channel", "channels").c_str(), cfg.bytes_per_image(),
                cfg.positions(), cfg.n_layers, cfg.n_heads, cfg.d_head, cfg.d_model, cfg.d_ff,
                act_name(cfg.activation), cfg.mixtures, cfg.d_out(), attention.c_str(),
                static_cast<long long>(cfg.parameter_count()), memory);
  nlohmann::json j = json_header("info");
  j.update({{"model", path},
            {"config", nlohmann::json::parse(cfg.to_json())},
            {"parameters", cfg.parameter_count()},
            {"attention", attention_name(cfg.attention)},
            // S and z (linear), or the KV cache at the last position (softmax: grows with t)
            {"state_bytes_per_image", per_image},
            {"memory_grows_with_position", keeps_kv_cache(cfg)},
            {"positions", cfg.positions()}});
  std::string device;
  if (!a.device.empty()) { // the model made ready there, as a run would: the device's own name
    const Engine engine(m, run);
    j.update(numerics_json(engine));
    device = "device          " + engine.device() + "\n";
  }
  a.report.emit(std::string(text) + device + "config.json     " + cfg.to_json() + "\n", j);
  return 0;
}

} // namespace

Command add_info(CLI::App &app) {
  auto a = std::make_shared<InfoArgs>();
  CLI::App *cmd = app.add_subcommand("info", "config, parameter count and state bytes per image");
  add_model_option(cmd, a->model, kDefaultModel);
  cmd->add_option("--device", a->device,
                  "also the device a run would use there, by its name: " + device_help());
  add_report_options(cmd, a->report);
  return {cmd, [a] { return run_info(*a); }};
}

} // namespace tarnn::cli
