// tarnn score: teacher-forced bits/dim of images (docs/SPEC.md section 2).
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "options.h"

namespace tarnn::cli {

namespace {

struct ScoreArgs {
  std::string model;
  RunOptions run;
  std::string images;
  int64_t limit = 0;
  bool json = false;
};

int run_score(const ScoreArgs &a) {
  if (a.limit < 0)
    throw Error("--limit must be >= 0 (0: every image)");
  Engine engine(load_model(a.model), a.run);
  ImageSet images = read_images(a.images, engine.config());
  if (a.limit > 0 && a.limit < images.count) {
    images.count = a.limit;
    images.bytes.resize(size_t(a.limit) * images.bytes_per_image());
  }
  const std::vector<double> bpd =
      score_images(engine, images, progress_bar(engine.config().positions()));
  double mean = 0;
  for (double b : bpd)
    mean += b / double(bpd.size());
  if (a.json) {
    const nlohmann::json j = {{"model", a.model},
                              {"images_file", a.images},
                              {"images", images.count},
                              {"bits_per_dim", mean},
                              {"per_image", bpd}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("bits/dim %.6f over %lld images\n", mean, static_cast<long long>(images.count));
  }
  return 0;
}

} // namespace

Command add_score(CLI::App &app) {
  auto a = std::make_shared<ScoreArgs>();
  CLI::App *cmd = app.add_subcommand("score", "teacher-forced bits/dim of images");
  add_model_option(cmd, a->model, kDefaultModel);
  add_run_options(cmd, a->run);
  cmd->add_option("--images", a->images, "MNIST IDX file (idx3-ubyte) or PNG")->required();
  add_number<int64_t>(cmd, "--limit", a->limit, "score only the first N images (0: all)", 0,
                      INT64_MAX);
  cmd->add_flag("--json", a->json, "print JSON with per-image figures");
  return {cmd, [a] { return run_score(*a); }};
}

} // namespace tarnn::cli
