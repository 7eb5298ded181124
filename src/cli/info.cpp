// tarnn info: a model's config, parameter count and state bytes per image.
#include <cstdio>
#include <memory>

#include "options.h"

namespace tarnn::cli {

namespace {

int run_info(const std::string &model) {
  const Model m = load_model(model);
  const Config &cfg = m.config;
  std::printf("model           %s\n", model.c_str());
  std::printf("image           %dx%d, %d channel(s): %d bytes, %d positions\n", cfg.height,
              cfg.width, cfg.channels, cfg.bytes_per_image(), cfg.positions());
  std::printf("layers          %d x (%d heads of %d), d_model %d, d_ff %d, %s\n", cfg.n_layers,
              cfg.n_heads, cfg.d_head, cfg.d_model, cfg.d_ff, act_name(cfg.activation));
  std::printf("output          %d logistics (%d values)\n", cfg.mixtures, cfg.d_out());
  std::printf("attention       %s\n", cfg.attention.c_str());
  std::printf("parameters      %lld (positional table included)\n",
              static_cast<long long>(cfg.parameter_count()));
  std::printf("state per image %lld bytes (S and z of every layer and head, fp32; constant in "
              "the position)\n",
              static_cast<long long>(cfg.state_bytes_per_image()));
  std::printf("config.json     %s\n", cfg.to_json().c_str());
  return 0;
}

} // namespace

Command add_info(CLI::App &app) {
  auto model = std::make_shared<std::string>();
  CLI::App *cmd = app.add_subcommand("info", "config, parameter count and state bytes per image");
  add_model_option(cmd, *model, kDefaultModel);
  return {cmd, [model] { return run_info(*model); }};
}

} // namespace tarnn::cli
