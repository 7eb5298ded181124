// tarnn info: a model's config, parameter count and state bytes per image.
#include <cstdio>
#include <memory>

#include "options.h"

namespace tarnn::cli {

namespace {

struct InfoArgs {
  std::string model;
  Report report;
};

int run_info(const InfoArgs &a) {
  const std::string path = find_model(a.model);
  const Model m = load_model(path);
  const Config &cfg = m.config;
  char text[2048];
  std::snprintf(text, sizeof text,
                "model           %s\n"
                "image           %dx%d, %s: %d bytes, %d positions\n"
                "layers          %d x (%d heads of %d), d_model %d, d_ff %d, %s\n"
                "output          %d logistics (%d values)\n"
                "attention       %s\n"
                "parameters      %lld (positional table included)\n"
                "state per image %lld bytes (S and z of every layer and head, %s; constant in the "
                "position)\n",
                path.c_str(), cfg.height, cfg.width,
                count_of(cfg.channels, "channel", "channels").c_str(), cfg.bytes_per_image(),
                cfg.positions(), cfg.n_layers, cfg.n_heads, cfg.d_head, cfg.d_model, cfg.d_ff,
                act_name(cfg.activation), cfg.mixtures, cfg.d_out(), cfg.attention.c_str(),
                static_cast<long long>(cfg.parameter_count()),
                static_cast<long long>(state_bytes_per_image(cfg, StateFormat::Fp32)),
                name(StateFormat::Fp32));
  nlohmann::json j = json_header("info");
  j.update({{"model", path},
            {"config", nlohmann::json::parse(cfg.to_json())},
            {"parameters", cfg.parameter_count()},
            {"state_bytes_per_image", state_bytes_per_image(cfg, StateFormat::Fp32)},
            {"positions", cfg.positions()}});
  a.report.emit(std::string(text) + "config.json     " + cfg.to_json() + "\n", j);
  return 0;
}

} // namespace

Command add_info(CLI::App &app) {
  auto a = std::make_shared<InfoArgs>();
  CLI::App *cmd = app.add_subcommand("info", "config, parameter count and state bytes per image");
  add_model_option(cmd, a->model, kDefaultModel);
  add_report_options(cmd, a->report);
  return {cmd, [a] { return run_info(*a); }};
}

} // namespace tarnn::cli
