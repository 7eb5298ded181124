// Image completion: known bytes survive exactly whatever the mask (prefix or not), the RNG rule
// makes completions independent of batch, threads and the other images chosen, and the flags
// that choose images and masks reject what they cannot mean.
#include <gtest/gtest.h>

#include "tarnn/tarnn.h"
#include "test_util.h"

using namespace tarnn;
using namespace tarnn_test;

namespace {

Engine cpu(const Model &m, int batch, int threads) {
  RunOptions o;
  o.batch = batch;
  o.threads = threads;
  return Engine(m, o);
}

ImageSet complete(Engine &&e, const ImageSet &in, const std::vector<int64_t> &index,
                  const std::vector<uint8_t> &known, int samples, uint64_t seed,
                  const Progress &progress = nullptr) {
  return complete_images(e, in, index, known, samples, seed, progress);
}

const Model &small() {
  static const Model m = load_model(small_golden());
  return m;
}

const Model &mnist_random() {
  static const Model m = random_model(Config::mnist(), 42);
  return m;
}

// Images with every byte value about, so a known byte is never the sampler's likely guess.
ImageSet noise_images(const Config &c, int64_t count, uint32_t seed) {
  ImageSet s{count, c.height, c.width, c.channels, {}};
  s.bytes.resize(size_t(count) * c.bytes_per_image());
  for (auto &b : s.bytes) {
    seed = seed * 1664525u + 1013904223u;
    b = uint8_t(seed >> 24);
  }
  return s;
}

std::vector<uint8_t> checkerboard(const Config &c) {
  std::vector<uint8_t> m(c.bytes_per_image());
  for (size_t i = 0; i < m.size(); ++i) {
    const int px = int(i) / c.channels;
    m[i] = (px / c.width + px % c.width) % 2;
  }
  return m;
}

// Known outside a centred rectangle of half the height and width.
std::vector<uint8_t> hole(const Config &c) {
  std::vector<uint8_t> m(c.bytes_per_image(), 1);
  for (size_t i = 0; i < m.size(); ++i) {
    const int px = int(i) / c.channels, y = px / c.width, x = px % c.width;
    if (y >= c.height / 4 && y < c.height / 4 + (c.height + 1) / 2 && x >= c.width / 4 &&
        x < c.width / 4 + (c.width + 1) / 2)
      m[i] = 0;
  }
  return m;
}

// Every known byte of every completion equals the input's; returns how many unknown bytes
// differ between completions 0 and 1 of the first image (they are independent samples).
int check_known_kept(const ImageSet &in, const std::vector<int64_t> &index,
                     const std::vector<uint8_t> &known, const ImageSet &out, int K) {
  const size_t T = known.size();
  EXPECT_EQ(out.count, int64_t(index.size()) * K);
  for (size_t i = 0; i < index.size(); ++i)
    for (int k = 0; k < K; ++k)
      for (size_t t = 0; t < T; ++t)
        if (known[t]) {
          EXPECT_EQ(out.bytes[(i * K + k) * T + t], in.bytes[index[i] * T + t])
              << "image " << index[i] << " sample " << k << " byte " << t;
        }
  int differ = 0;
  for (size_t t = 0; K > 1 && t < T; ++t)
    differ += !known[t] && out.bytes[t] != out.bytes[T + t];
  return differ;
}

} // namespace

TEST(IndexList, RangesListsAndSingles) {
  EXPECT_EQ(parse_index_list("3", 10), (std::vector<int64_t>{3}));
  EXPECT_EQ(parse_index_list("0-3", 10), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(parse_index_list("0,5,7-9", 10), (std::vector<int64_t>{0, 5, 7, 8, 9}));
  EXPECT_EQ(parse_index_list("9,2", 10), (std::vector<int64_t>{9, 2})); // the order given
  EXPECT_EQ(parse_index_list("4-4", 5), (std::vector<int64_t>{4}));
}

// Counted without a file, so the command refuses a bad --index before loading anything; a huge
// range is counted, not expanded.
TEST(IndexList, SizeWithoutAFile) {
  EXPECT_EQ(index_list_size("3"), 1);
  EXPECT_EQ(index_list_size("0,5,7-9"), 5);
  EXPECT_EQ(index_list_size("0-999999999999"), 1000000000000);
  for (const char *bad : {"", ",", "1,", ",1", "a", "1-", "-1", "1--2", "3-1", "1 ,2", "+1", "0x1",
                          "1.5", "99999999999999999999"})
    EXPECT_THROW(index_list_size(bad), Error) << "'" << bad << "'";
}

TEST(IndexList, BadSelectionsAreErrors) {
  for (const char *bad : {"", ",", "1,", ",1", "a", "1-", "-1", "1--2", "3-1", "1 ,2", "+1", "0x1",
                          "1.5", "99999999999999999999", "2,2", "0-3,3"})
    EXPECT_THROW(parse_index_list(bad, 10), Error) << "'" << bad << "'";
  EXPECT_THROW(parse_index_list("10", 10), Error);
  EXPECT_THROW(parse_index_list("0-1000000000000", 10), Error); // refused before expanding
  try {
    parse_index_list("5-20", 16);
    FAIL();
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "index: image 20 is out of range: the file holds 16 images (0-15)");
  }
}

TEST(Mask, PrefixesAndDefault) {
  const Config c = Config::mnist();
  std::vector<uint8_t> want(784, 0);
  std::fill(want.begin(), want.begin() + 14 * 28, 1);
  EXPECT_EQ(make_mask({}, c), want); // the top half, as Figure 3
  MaskSpec rows;
  rows.keep_rows = 14;
  EXPECT_EQ(make_mask(rows, c), want);
  MaskSpec keep;
  keep.keep = 14 * 28;
  EXPECT_EQ(make_mask(keep, c), want);
  keep.keep = 0; // nothing known: plain sampling
  EXPECT_EQ(make_mask(keep, c), std::vector<uint8_t>(784, 0));
  keep.keep = 783; // only the last byte is generated
  EXPECT_EQ(make_mask(keep, c)[782], 1);
  EXPECT_EQ(describe_mask(want), "392 of 784 bytes known");
  // RGB: a row is width * 3 bytes
  const Config rgb = Config::cifar10();
  rows.keep_rows = 1;
  const std::vector<uint8_t> m = make_mask(rows, rgb);
  EXPECT_EQ(std::count(m.begin(), m.end(), 1), 32 * 3);
}

TEST(Mask, BadSpecsAreErrors) {
  const Config c = Config::mnist();
  MaskSpec s;
  s.keep_rows = 29;
  EXPECT_THROW(make_mask(s, c), Error);
  s.keep_rows = -1;
  EXPECT_THROW(make_mask(s, c), Error);
  s.keep_rows = 28; // everything known: nothing to complete
  EXPECT_THROW(make_mask(s, c), Error);
  s = {};
  s.keep = 785;
  EXPECT_THROW(make_mask(s, c), Error);
  s.keep = 784;
  EXPECT_THROW(make_mask(s, c), Error);
  s.keep_rows = 3; // two ways at once
  EXPECT_THROW(make_mask(s, c), Error);
  s = {};
  s.png = "/nonexistent/mask.png";
  EXPECT_THROW(make_mask(s, c), Error);
}

TEST(Mask, PngAnyPatternAndSizeChecked) {
  const Config c = Config::mnist();
  TempDir dir;
  const std::vector<uint8_t> board = checkerboard(c);
  std::vector<uint8_t> gray(784), rgb(784 * 3);
  for (int i = 0; i < 784; ++i) {
    gray[i] = board[i] ? 255 : 0;
    rgb[3 * i + 2] = board[i] ? 1 : 0; // any nonzero colour channel counts as known
  }
  write_png(dir / "gray.png", 28, 28, 1, gray.data());
  write_png(dir / "rgb.png", 28, 28, 3, rgb.data());
  write_png(dir / "small.png", 27, 28, 1, gray.data());
  MaskSpec s;
  s.png = dir / "gray.png";
  EXPECT_EQ(make_mask(s, c), board);
  s.png = dir / "rgb.png";
  EXPECT_EQ(make_mask(s, c), board);
  s.png = dir / "small.png";
  try {
    make_mask(s, c);
    FAIL();
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("mask is 28x27, the images are 28x28"), std::string::npos)
        << e.what();
  }
  // A two-channel model: one mask pixel covers both bytes of its pixel.
  const Config &two = small().config;
  std::vector<uint8_t> px(two.height * two.width, 0);
  px[3] = 255;
  write_png(dir / "two.png", two.width, two.height, 1, px.data());
  s.png = dir / "two.png";
  const std::vector<uint8_t> m = make_mask(s, two);
  EXPECT_EQ(std::count(m.begin(), m.end(), 1), 2);
  EXPECT_TRUE(m[6] && m[7]);
}

// Prefix and non-prefix masks on the small model: many images, samples, batches and threads.
TEST(Complete, KnownBytesKeptExactlySmallModel) {
  const Model &w = small();
  const Config &c = small().config;
  const ImageSet in = noise_images(c, 5, 7);
  MaskSpec rows;
  rows.keep_rows = 2;
  std::vector<uint8_t> scattered(c.bytes_per_image(), 0); // known bytes after unknown ones
  for (size_t t = 0; t < scattered.size(); t += 3)
    scattered[t] = 1;
  for (const auto &known : {make_mask(rows, c), checkerboard(c), hole(c), scattered}) {
    const std::vector<int64_t> index{4, 0, 1, 2};
    const ImageSet out = complete(cpu(w, 2, 2), in, index, known, 3, 11);
    EXPECT_GT(check_known_kept(in, index, known, out, 3), 0) << "samples 0 and 1 are equal";
  }
}

// The paper's MNIST size: a top-half prefix, a checkerboard and a hole in the middle.
TEST(Complete, KnownBytesKeptExactlyMnistSize) {
  const Model &w = mnist_random();
  const Config &c = mnist_random().config;
  const ImageSet in = noise_images(c, 3, 5);
  for (const auto &known : {make_mask({}, c), checkerboard(c), hole(c)}) {
    const std::vector<int64_t> index{2};
    const ImageSet out = complete(cpu(w, 2, 2), in, index, known, 2, 3);
    EXPECT_GT(check_known_kept(in, index, known, out, 2), 0) << "samples 0 and 1 are equal";
  }
}

TEST(Complete, SameSeedSameCompletionsWhateverBatchThreadsAndSelection) {
  const Model &w = small();
  const Config &c = small().config;
  const ImageSet in = noise_images(c, 6, 9);
  const std::vector<uint8_t> known = hole(c);
  const std::vector<int64_t> index{0, 1, 2, 4, 5};
  const ImageSet base = complete(cpu(w, 15, 1), in, index, known, 3, 21);
  EXPECT_EQ(base.bytes, complete(cpu(w, 1, 1), in, index, known, 3, 21).bytes);
  EXPECT_EQ(base.bytes, complete(cpu(w, 4, 2), in, index, known, 3, 21).bytes);
  EXPECT_EQ(base.bytes, complete(cpu(w, 7, 3), in, index, known, 3, 21).bytes);
  EXPECT_NE(base.bytes, complete(cpu(w, 15, 1), in, index, known, 3, 22).bytes);
  // Image 4 alone, or among others in another order, completes the same (RNG rule).
  const size_t T = c.bytes_per_image();
  const ImageSet alone = complete(cpu(w, 2, 1), in, {4}, known, 3, 21);
  EXPECT_TRUE(std::equal(alone.bytes.begin(), alone.bytes.end(), base.bytes.begin() + 3 * 3 * T));
  const ImageSet mixed = complete(cpu(w, 2, 1), in, {5, 4, 0}, known, 3, 21);
  EXPECT_TRUE(std::equal(alone.bytes.begin(), alone.bytes.end(), mixed.bytes.begin() + 3 * T));
}

// With nothing known, completion k of file image i is `tarnn sample` image i * K + k.
TEST(Complete, RngIndexRuleMatchesSampling) {
  const Model &w = small();
  const Config &c = small().config;
  const ImageSet in = noise_images(c, 4, 1);
  const int K = 3;
  const ImageSet out =
      complete(cpu(w, 4, 1), in, {3}, std::vector<uint8_t>(c.bytes_per_image(), 0), K, 8);
  Engine e = cpu(w, 4, 1);
  EXPECT_EQ(out.bytes, sample_images(e, K, 8, completion_rng_index(3, K, 0)).bytes);
  EXPECT_EQ(completion_rng_index(3, K, 2), 11);
}

TEST(Complete, ProgressCountsEveryPositionOnce) {
  const Model &w = small();
  const Config &c = small().config;
  const ImageSet in = noise_images(c, 6, 2);
  int64_t last = 0, total = 0;
  complete(cpu(w, 3, 1), in, {0, 1, 4}, hole(c), 2, 1, [&](int64_t d, int64_t t) {
    EXPECT_GE(d, last);
    last = d;
    total = t;
  });
  EXPECT_EQ(total, 3 * 2 * c.positions());
  EXPECT_EQ(last, total);
}

TEST(Grid, Figure3Layout) {
  const Config c = Config::mnist();
  const ImageSet in = noise_images(c, 3, 4);
  const std::vector<uint8_t> known = make_mask({}, c);
  const int K = 2;
  ImageSet done{2 * K, 28, 28, 1, std::vector<uint8_t>(size_t(2 * K) * 784, 77)};
  const ImageSet g = completion_grid(in, {2, 0}, known, done, K);
  EXPECT_EQ(g.channels, 3); // grayscale goes to RGB so the occlusion can be tinted
  EXPECT_EQ(g.width, (K + 2) * 28 + (K + 3) * 2 + 6); // 6: the band before the original
  EXPECT_EQ(g.height, 2 * 28 + 3 * 2);
  auto at = [&](int x, int y, int ch) { return g.bytes[(size_t(y) * g.width + x) * 3 + ch]; };
  // row 1 holds image 0: occluded cell (known top: grey; unknown bottom: dim red), completions,
  // original
  const int y0 = 2 + 30;
  EXPECT_EQ(at(2 + 5, y0 + 3, 0), in.bytes[3 * 28 + 5]);
  EXPECT_EQ(at(2 + 5, y0 + 3, 1), in.bytes[3 * 28 + 5]);
  EXPECT_EQ(at(2 + 5, y0 + 20, 0), 120);
  EXPECT_EQ(at(2 + 5, y0 + 20, 1), 0);
  EXPECT_EQ(at(2 + 30 + 5, y0 + 20, 2), 77);
  EXPECT_EQ(at(2 + 3 * 30 + 6 + 5, y0 + 20, 2), in.bytes[20 * 28 + 5]);
  EXPECT_EQ(at(2 + 3 * 30 + 2, y0 + 20, 0), 176); // the band
  EXPECT_EQ(at(0, 0, 0), 64);                     // padding
}
