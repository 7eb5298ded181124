// tarnn score: teacher-forced bits/dim of images (docs/SPEC.md section 2): files (IDX, .npy,
// PNG), folders of them, or glob patterns.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <glob.h>
#include <memory>

#include "options.h"

namespace tarnn::cli {

namespace {

struct ScoreArgs {
  std::string model;
  RunArgs run;
  std::vector<std::string> images;
  int64_t limit = 0;
  Report report;
};

bool image_file_name(const std::string &name) {
  return name[0] != '.' &&
         (has_extension(name, ".png") || has_extension(name, ".npy") ||
          name.find("ubyte") != std::string::npos || name.find(".idx") != std::string::npos);
}

// Every input as files: a folder's image files (sorted), a pattern's matches (sorted).
std::vector<std::string> expand(const std::vector<std::string> &inputs) {
  std::vector<std::string> files;
  for (const std::string &in : inputs) {
    std::error_code e;
    if (std::filesystem::is_directory(in, e)) {
      std::vector<std::string> found;
      for (const auto &entry : std::filesystem::directory_iterator(in, e))
        if (entry.is_regular_file() && image_file_name(entry.path().filename().string()))
          found.push_back(entry.path().string());
      if (found.empty())
        throw Error(in + ": a folder without image files (.png, .npy, IDX)", Error::Kind::File);
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (!std::filesystem::exists(in, e) && in.find_first_of("*?[") != std::string::npos) {
      glob_t g{};
      const int rc = ::glob(in.c_str(), 0, nullptr, &g);
      if (rc != 0) {
        globfree(&g);
        throw Error(in + ": no file matches", Error::Kind::File);
      }
      for (size_t i = 0; i < g.gl_pathc; ++i)
        files.push_back(g.gl_pathv[i]);
      globfree(&g);
    } else {
      files.push_back(in); // read_images says what is wrong with it
    }
  }
  return files;
}

int run_score(const ScoreArgs &a) {
  const RunOptions run = a.run.options(); // flags first: a usage error before loading
  const std::string model = find_model(a.model);
  Engine engine(load_model(model), run);
  const Config &c = engine.config();
  const std::vector<std::string> files = expand(a.images);
  ImageSet images{0, c.height, c.width, c.channels, {}};
  for (const std::string &f : files) {
    if (a.limit > 0 && images.count >= a.limit)
      break;
    const ImageSet one = read_images(f, c);
    images.bytes.insert(images.bytes.end(), one.bytes.begin(), one.bytes.end());
    images.count += one.count;
  }
  if (a.limit > 0 && a.limit < images.count) {
    images.count = a.limit;
    images.bytes.resize(size_t(a.limit) * images.bytes_per_image());
  }
  if (!a.report.json_file.empty())
    check_output_file(a.report.json_file);
  std::vector<double> bpd;
  const ProgressBar bar = progress_bar(c.positions(), a.report.quiet);
  try {
    bpd = score_images(engine, images, bar.progress);
  } catch (const Interrupted &i) {
    std::fprintf(stderr, "tarnn: interrupted (signal %d)\n", i.signal);
    return 128 + i.signal;
  }
  const double secs = bar.finish();
  double mean = 0;
  for (double b : bpd)
    mean += b / double(bpd.size());
  char line[256];
  std::snprintf(line, sizeof line, "bits/dim %.6f over %s\n", mean,
                count_of(images.count, "image", "images").c_str());
  print_warnings(engine);
  nlohmann::json j = json_header("score");
  j.update({{"model", model},
            {"images_file", files.size() == 1 ? files[0] : ""},
            {"files", files},
            {"images", images.count},
            {"bits_per_dim", mean},
            {"seconds", secs},
            {"images_per_second", double(images.count) / secs},
            {"per_image", bpd}});
  j.update(numerics_json(engine));
  a.report.emit(line, j);
  return 0;
}

} // namespace

Command add_score(CLI::App &app) {
  auto a = std::make_shared<ScoreArgs>();
  CLI::App *cmd = app.add_subcommand("score", "teacher-forced bits/dim of images");
  add_model_option(cmd, a->model, kDefaultModel);
  add_run_options(cmd, a->run);
  cmd->add_option("--images", a->images,
                  "IDX (MNIST's idx3-ubyte), .npy or PNG files, folders of them, or patterns "
                  "(quoted: 'imgs/*.png')")
      ->required()
      ->expected(1, -1);
  add_number<int64_t>(cmd, "--limit", a->limit, "score only the first N images (0: all)", 0,
                      INT64_MAX);
  add_report_options(cmd, a->report);
  return {cmd, [a] { return run_score(*a); }};
}

} // namespace tarnn::cli
