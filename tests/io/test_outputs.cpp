// The sinks of generated images (include/tarnn/outputs.h) that sample and complete share: the
// exact file names, a grid written in chunks equal to the grid of all images at once, folders and
// arrays that read back what they wrote (a resumed grid's source), and the resume record.
#include <fcntl.h>
#include <filesystem>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include "tarnn/tarnn.h"
#include "test_util.h"

using namespace tarnn;
using namespace tarnn_test;

namespace {

// n images of h x w x c, each byte a function of its place, so any misplaced one shows.
ImageSet images(int64_t n, int h = 5, int w = 4, int c = 2, int salt = 0) {
  ImageSet s{n, h, w, c, std::vector<uint8_t>(size_t(n) * h * w * c)};
  for (size_t i = 0; i < s.bytes.size(); ++i)
    s.bytes[i] = uint8_t(i * 7 + size_t(salt));
  return s;
}

ImageSet slice(const ImageSet &s, int64_t first, int64_t count) {
  ImageSet t{count, s.height, s.width, s.channels, {}};
  t.bytes.assign(s.image(first), s.image(first) + size_t(count) * s.bytes_per_image());
  return t;
}

} // namespace

TEST(Outputs, FileNamesAreTheIndexInEightDigits) {
  EXPECT_EQ(image_png_name(42), "00000042.png");
  EXPECT_EQ(image_png_name(123456789), "123456789.png");
  EXPECT_EQ(completion_png_name(42, 3), "00000042-03.png");
}

TEST(Outputs, GridInChunksIsTheGridOfAllImages) {
  TempDir dir;
  const ImageSet all = images(10);
  auto grid = grid_sink(dir / "g.png", 10, 5, 4, 2);
  EXPECT_GT(grid->memory_bytes(), double(all.bytes.size()));
  grid->add(slice(all, 0, 3));
  grid->add(slice(all, 3, 7));
  grid->finish();
  write_grid_png(dir / "want.png", make_grid(all, grid_columns(10)), 0);
  EXPECT_EQ(read_file(dir / "g.png"), read_file(dir / "want.png"));
  auto laid_out = grid_sink(dir / "l.png", 10, 5, 4, 2, {3, 1, 7, 2}); // draws draw_grid's bytes
  laid_out->add(all);
  laid_out->finish();
  EXPECT_EQ(read_images(dir / "l.png").bytes, draw_grid(all, {3, 1, 7, 2}).bytes);
  const ImageSet back = read_images(dir / "g.png");
  EXPECT_EQ(back.width % make_grid(all, grid_columns(10)).width, 0); // scaled whole pixels
}

// The one grid layout of `sample -o` and tarnn.grid: torchvision's make_grid (nrow, padding,
// pad_value), each pixel then drawn scale x scale times; each argument checked on its own.
TEST(Outputs, GridLayoutIsMakeGridThenScaled) {
  const ImageSet all = images(10); // 5 x 4 x 2
  // nrow 3, padding 1, pad_value 7 at scale 1, against a layout written out here
  const ImageSet g = draw_grid(all, {3, 1, 7, 1});
  ASSERT_EQ(g.height, 4 * 5 + 5 * 1); // rows = ceil(10 / 3)
  ASSERT_EQ(g.width, 3 * 4 + 4 * 1);
  std::vector<uint8_t> want(size_t(g.height) * g.width * 2, 7);
  for (int i = 0; i < 10; ++i)
    for (int y = 0; y < 5; ++y)
      for (int x = 0; x < 4; ++x)
        for (int c = 0; c < 2; ++c)
          want[((size_t(1 + i / 3 * 6 + y) * g.width) + 1 + i % 3 * 5 + x) * 2 + c] =
              all.image(i)[(y * 4 + x) * 2 + c];
  EXPECT_EQ(g.bytes, want);
  // the defaults: a square-ish grid (4 columns), 2 pixels of 64, scaled toward 600 (8 here)
  const ImageSet plain = draw_grid(all, {0, 2, 64, 1});
  EXPECT_EQ(plain.bytes, make_grid(all, grid_columns(10)).bytes);
  const ImageSet big = draw_grid(all, {});
  EXPECT_EQ(big.bytes, scale_image(plain, 8).bytes);
  EXPECT_EQ(draw_grid(all, {0, 2, 64, 3}).bytes, scale_image(plain, 3).bytes);
  // each argument alone
  EXPECT_EQ(draw_grid(all, {20, 2, 64, 1}).width, 10 * 4 + 11 * 2); // nrow over n: one row
  EXPECT_EQ(draw_grid(all, {5, 2, 64, 1}).height, 2 * 5 + 3 * 2);
  const ImageSet tight = draw_grid(all, {10, 0, 64, 1});
  EXPECT_EQ(tight.width, 40);
  EXPECT_EQ(tight.bytes[0], all.bytes[0]);
  EXPECT_EQ(draw_grid(all, {0, 2, 255, 1}).bytes[0], 255);
  EXPECT_EQ(plain.bytes[0], 64);
}

TEST(Outputs, BadGridValuesAreRefused) {
  const ImageSet all = images(4);
  EXPECT_EQ(error_of([&] {
              draw_grid(all, {-1, 2, 64, 0});
            }),
            "nrow must be in [0, 65536] (got -1)");
  EXPECT_EQ(error_of([&] {
              draw_grid(all, {0, 65, 64, 0});
            }),
            "padding must be in [0, 64] (got 65)");
  EXPECT_EQ(error_of([&] {
              draw_grid(all, {0, 2, 256, 0});
            }),
            "pad_value must be in [0, 255] (got 256)");
  EXPECT_EQ(error_of([&] { draw_grid(all, {0, 2, 64, 17}); }), "scale must be in [0, 16] (got 17)");
  EXPECT_NE(error_of([&] {
              draw_grid(ImageSet{0, 5, 4, 2, {}}, {});
            }).find("at least one image"),
            std::string::npos);
  // a grid within the image count but too big once scaled: refused before any work
  EXPECT_NE(error_of([&] {
              check_grid(kMaxGridImages, 28, 28, 1, {0, 2, 64, 16});
            }).find("a smaller scale"),
            std::string::npos);
  EXPECT_EQ(check_grid(4, 5, 4, 2, {0, 2, 64, 1}), int64_t(2 * 5 + 3 * 2) * (2 * 4 + 3 * 2) * 2);
}

TEST(Outputs, PngFolderNamesEachImageAndReadsThemBack) {
  TempDir dir;
  const ImageSet all = images(5);
  const std::string out = dir / "imgs";
  {
    auto folder = png_folder_sink(out, 5, 4, 2, [](int64_t i) { return image_png_name(100 + i); });
    EXPECT_TRUE(std::filesystem::is_directory(out)); // made at once, before any image
    folder->add(slice(all, 0, 2));
    folder->add(slice(all, 2, 3));
    EXPECT_TRUE(std::filesystem::exists(out + "/00000104.png"));
    EXPECT_EQ(folder->read_back(5).bytes, all.bytes);
  } // interrupted
  // a resumed folder goes on at the image after those already in it
  auto resumed = png_folder_sink(
      out, 5, 4, 2, [](int64_t i) { return image_png_name(100 + i); }, 5);
  resumed->add(images(1, 5, 4, 2, 99));
  EXPECT_TRUE(std::filesystem::exists(out + "/00000105.png"));
  EXPECT_EQ(read_images(out + "/00000100.png").bytes, slice(all, 0, 1).bytes); // untouched
}

TEST(Outputs, NpyInChunksAndResumed) {
  TempDir dir;
  const ImageSet all = images(6);
  {
    auto npy = npy_sink(dir / "a.npy", 6, 5, 4, 2);
    npy->add(slice(all, 0, 4));
    EXPECT_EQ(npy->read_back(4).bytes, slice(all, 0, 4).bytes);
  } // interrupted: a.npy.partial stays
  EXPECT_FALSE(std::filesystem::exists(dir / "a.npy"));
  auto npy = npy_sink(dir / "a.npy", 6, 5, 4, 2, 4);
  npy->add(slice(all, 4, 2));
  npy->finish();
  EXPECT_EQ(read_images(dir / "a.npy").bytes, all.bytes);
}

// One run per output: a second writer of a folder or an array (another process, or this one) is
// refused at once and touches nothing (two resumes of one output once raced, and the record one
// left blocked the next resume); the lock goes with the writer.
TEST(Outputs, ASecondWriterOfAnOutputIsRefused) {
  TempDir dir;
  const std::string out = dir / "imgs", npy = dir / "a.npy";
  auto name = [](int64_t i) { return image_png_name(i); };
  {
    auto folder = png_folder_sink(out, 5, 4, 2, name);
    folder->add(images(2));
    EXPECT_EQ(error_of([&] { png_folder_sink(out, 5, 4, 2, name, 2); }),
              out + ": another tarnn run is writing it (one run per output at a time: wait for it "
                    "to end, or write elsewhere)");
    auto array = npy_sink(npy, 6, 5, 4, 2);
    array->add(images(2));
    EXPECT_NE(error_of([&] { npy_sink(npy, 6, 5, 4, 2); }).find(npy + ": another tarnn run"),
              std::string::npos);
    EXPECT_NE(error_of([&] { npy_sink(npy, 6, 5, 4, 2, 2); }).find(npy + ": another tarnn run"),
              std::string::npos);
    EXPECT_EQ(array->read_back(2).bytes, images(2).bytes); // not truncated by the refused ones
  }
  auto resumed = npy_sink(npy, 6, 5, 4, 2, 2); // the first gone: its lock with it
  EXPECT_EQ(resumed->read_back(2).bytes, images(2).bytes);
  png_folder_sink(out, 5, 4, 2, name, 2);
}

// The size of an array is known before the first image, and so is the count of a folder's files:
// a disk they cannot fit refuses the run before any work (a 400-image --npy on a 256 KiB disk
// once failed after 51 s of work and left its partial filling the disk).
TEST(Outputs, ADiskTooSmallIsFoundBeforeTheFirstImage) {
  TempDir dir;
  const std::string npy = dir / "big.npy";
  const std::string error = error_of([&] { npy_sink(npy, int64_t(1) << 40, 64, 64, 4); });
  EXPECT_NE(error.find(npy + ".partial: needs 18 PB and its disk has "), std::string::npos)
      << error;
  EXPECT_NE(error.find(" free: free some space, or write it elsewhere"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(npy + ".partial")); // nothing of it left behind
  EXPECT_NE(
      error_of([&] { check_folder_space(dir.path.string(), int64_t(1) << 60); }).find("needs "),
      std::string::npos);
  check_free_space(dir / "small.npy", 1000, 10); // room: no error
  check_folder_space(dir.path.string(), 1000);
}

TEST(Outputs, ResumeRecordCountsAndRefusesAnotherRun) {
  TempDir dir;
  const std::string path = dir / "run.json";
  ResumeRecord record(path, R"({"seed": 1, "n": 10})");
  EXPECT_EQ(record.load(), 0); // no record: from the start
  record.add(images(3));
  record.add(images(4));
  EXPECT_EQ(ResumeRecord(path, R"({"seed": 1, "n": 10})").load(), 7);
  EXPECT_NE(error_of([&] {
              ResumeRecord(path, R"({"seed": 2, "n": 10})").load();
            }).find("was written by another run (seed differs)"),
            std::string::npos);
  write_file(path, {'{', '}'});
  EXPECT_NE(error_of([&] { ResumeRecord(path, "{}").load(); }).find("not a tarnn run record"),
            std::string::npos);
  record.finish();
  EXPECT_FALSE(std::filesystem::exists(path));
}

// A field that only one of the record and the run has differs too: a run's optional field (a
// temperature other than 1, absent from a run at 1 and from any record written before it existed)
// is compared both ways, so a run at 1 does not go on with a run at 0.7's images, nor the reverse.
TEST(Outputs, ResumeRecordComparesAFieldOnlyOneSideHas) {
  TempDir dir;
  const std::string path = dir / "run.json";
  const std::string at_1 = R"({"seed": 1, "n": 10})";
  const std::string at_07 = R"({"seed": 1, "n": 10, "temperature": 0.7})";
  for (const auto &[written, asked] : {std::pair{at_07, at_1}, std::pair{at_1, at_07}}) {
    std::filesystem::remove(path);
    ResumeRecord(path, written).add(images(2));
    EXPECT_EQ(ResumeRecord(path, written).load(), 2);
    EXPECT_NE(error_of([&, &asked = asked] {
                ResumeRecord(path, asked).load();
              }).find("was written by another run (temperature differs)"),
              std::string::npos)
        << written << " resumed as " << asked;
  }
}

// What --resume and --overwrite see of an earlier run: its record (an interrupted run's: a
// finished run removed it) and its count, read without load()'s checks; discard() removes it; a
// finished run's outputs are whole (every PNG there, the .npy's header and size exact).
TEST(Outputs, AnEarlierRunIsSeenAndAFinishedOneIsWhole) {
  TempDir dir;
  const std::string path = dir / "run.json";
  ResumeRecord record(path, R"({"seed": 1, "n": 10})");
  EXPECT_FALSE(record.exists());
  EXPECT_EQ(record.count_on_disk(), -1);
  record.add(images(3));
  EXPECT_TRUE(record.exists());
  EXPECT_EQ(record.count_on_disk(), 3);
  write_file(path, {'{', '}'});
  EXPECT_EQ(record.count_on_disk(), -1); // not a record: there, uncounted
  record.discard();
  EXPECT_FALSE(record.exists());
  record.discard(); // none: nothing to do

  const ImageSet all = images(3);
  const auto name = [](int64_t i) { return image_png_name(i); };
  auto folder = png_folder_sink(dir / "d", 5, 4, 2, name);
  folder->add(slice(all, 0, 2));
  EXPECT_FALSE(png_folder_is_whole(dir / "d", 3, name));
  folder->add(slice(all, 2, 1));
  EXPECT_TRUE(png_folder_is_whole(dir / "d", 3, name));
  auto npy = npy_sink(dir / "a.npy", 3, 5, 4, 2);
  npy->add(all);
  EXPECT_FALSE(npy_is_whole(dir / "a.npy", 3, 5, 4, 2)); // still a.npy.partial
  npy->finish();
  EXPECT_TRUE(npy_is_whole(dir / "a.npy", 3, 5, 4, 2));
  EXPECT_FALSE(npy_is_whole(dir / "a.npy", 4, 5, 4, 2)); // another run's shape
  EXPECT_FALSE(npy_is_whole(dir / "a.npy", 3, 4, 5, 2));
  std::filesystem::resize_file(dir / "a.npy", std::filesystem::file_size(dir / "a.npy") - 1);
  EXPECT_FALSE(npy_is_whole(dir / "a.npy", 3, 5, 4, 2)); // one byte short
}

// A record is checked before anything is trusted: its fields as a run writes them (a "done" of
// -5 once truncated the partial output, "32" threw the JSON library's own exception), and the
// images it counts against its checksum of their bytes (four flipped bytes were kept; a folder
// emptied since gave 0 new images and exit 0).
TEST(Outputs, ResumeVerifiesTheRecordAndTheImagesItCounts) {
  TempDir dir;
  const std::string path = dir / "run.json", run = R"({"seed": 1, "n": 10})";
  const ImageSet all = images(6);
  {
    ResumeRecord record(path, run);
    auto npy = npy_sink(dir / "a.npy", 10, 5, 4, 2);
    npy->add(slice(all, 0, 4)), record.add(slice(all, 0, 4));
    npy->add(slice(all, 4, 2)), record.add(slice(all, 4, 2));
  } // interrupted
  auto verify = [&] {
    return error_of([&] {
      ResumeRecord r(path, run);
      const int64_t done = r.load();
      r.verify(*npy_sink(dir / "a.npy", 10, 5, 4, 2, done));
    });
  };
  EXPECT_EQ(verify(), "(no error)");
  // four bytes flipped inside a finished image
  const std::string partial = dir / "a.npy.partial";
  std::vector<char> bytes = read_file(partial);
  for (size_t i = bytes.size() - 50; i < bytes.size() - 46; ++i)
    bytes[i] = char(~bytes[i]);
  write_file(partial, bytes);
  EXPECT_NE(verify().find("the 6 images written before are not those its record"),
            std::string::npos)
      << verify();
  // every field as a run writes it, refused before the partial is touched
  const std::vector<char> good = read_file(path);
  const auto j = nlohmann::json::parse(good.begin(), good.end());
  for (const nlohmann::json &done : {nlohmann::json(-5), nlohmann::json("32"), nlohmann::json(11),
                                     nlohmann::json(2.5), nlohmann::json(nullptr)}) {
    nlohmann::json bad = j;
    bad["done"] = done;
    const std::string text = bad.dump();
    write_file(path, std::vector<char>(text.begin(), text.end()));
    EXPECT_NE(error_of([&] {
                ResumeRecord(path, run).load();
              }).find("\"done\" must be a whole number of images in [0, 10] (got " + done.dump()),
              std::string::npos)
        << done;
  }
  for (const nlohmann::json &sum : {nlohmann::json("12"), nlohmann::json(7), nlohmann::json()}) {
    nlohmann::json bad = j;
    if (sum.is_null())
      bad.erase("checksum");
    else
      bad["checksum"] = sum;
    const std::string text = bad.dump();
    write_file(path, std::vector<char>(text.begin(), text.end()));
    EXPECT_NE(error_of([&] {
                ResumeRecord(path, run).load();
              }).find("\"checksum\" must be 16 hex digits"),
              std::string::npos)
        << sum;
  }
  EXPECT_EQ(read_file(partial), bytes); // untouched by every refusal
  // a folder's record over images that are not there
  const std::string folder = dir / "imgs", fpath = dir / "folder.json";
  ResumeRecord(fpath, run).add(images(3));
  const std::string missing = error_of([&] {
    ResumeRecord r(fpath, run);
    const int64_t done = r.load();
    r.verify(*png_folder_sink(folder, 5, 4, 2, image_png_name, done));
  });
  EXPECT_NE(missing.find("00000000.png"), std::string::npos) << missing;
  EXPECT_NE(missing.find("says 3 images were written"), std::string::npos) << missing;
}

TEST(Outputs, EachOutputIsCheckedBeforeAnyWork) {
  TempDir dir;
  EXPECT_NE(error_of([&] { grid_sink(dir / "no/such/g.png", 4, 5, 4, 2); }).find("cannot write"),
            std::string::npos);
  EXPECT_NE(error_of([&] { check_output_file(dir.path.string()); }).find("is a folder"),
            std::string::npos);
  EXPECT_NE(error_of([&] { grid_sink(dir / "big.png", kMaxGridImages + 1, 5, 4, 2); }),
            "(no error)");
  write_file(dir / "file", {'x'});
  EXPECT_NE(error_of([&] {
              png_folder_sink(dir / "file", 5, 4, 2, [](int64_t i) { return image_png_name(i); });
            }).find("cannot make the output folder"),
            std::string::npos);
  EXPECT_NE(error_of([&] { grid_sink(dir / "g.png", 4, 5, 4, 2)->read_back(1); }),
            "(no error)"); // a grid cannot be read back
}

// Issue 42, point 4: --npy through a link fills a partial beside the file the link names and
// renames it over that file, the link kept; into a FIFO (or a device) the array is written in
// order, nothing left beside it.
TEST(Outputs, NpyThroughALinkAndIntoAFifo) {
  TempDir dir;
  const ImageSet all = images(3);
  std::filesystem::create_directories(dir / "real");
  std::filesystem::create_symlink("real/a.npy", dir / "link.npy");
  {
    auto npy = npy_sink(dir / "link.npy", 3, 5, 4, 2);
    npy->add(slice(all, 0, 2));
    EXPECT_TRUE(std::filesystem::exists(dir / "real/a.npy.partial"));
    npy->add(slice(all, 2, 1));
    npy->finish();
  }
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "link.npy"));
  EXPECT_EQ(read_images(dir / "real/a.npy").bytes, all.bytes);
  EXPECT_FALSE(std::filesystem::exists(dir / "real/a.npy.partial"));
  const std::string fifo = dir / "fifo.npy";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK); // read after the writes
  ASSERT_GE(reader, 0);
  {
    auto npy = npy_sink(fifo, 3, 5, 4, 2);
    npy->add(all);
    EXPECT_NE(error_of([&] { npy->read_back(1); }).find("cannot be read back"), std::string::npos);
    npy->finish();
  }
  std::vector<char> got(4096);
  got.resize(size_t(std::max<ssize_t>(::read(reader, got.data(), got.size()), 0)));
  ::close(reader);
  EXPECT_EQ(got, read_file(dir / "real/a.npy")); // the same bytes as the file's
  struct stat st {};
  EXPECT_TRUE(::lstat(fifo.c_str(), &st) == 0 && S_ISFIFO(st.st_mode));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path), {}), 3); // no partial
  EXPECT_NE(error_of([&] { npy_sink(fifo, 3, 5, 4, 2, 1); }).find("cannot be resumed"),
            std::string::npos);
}

// Issue 42, point 5: an output name of 244 to 255 bytes failed once its partial, record or
// temporary added to it (--npy after computing every image); the names are checked before any
// work, and companions fit.
TEST(Outputs, LongNamesWorkOrAreRefusedBeforeAnyWork) {
  TempDir dir;
  const std::string npy = dir / (std::string(247, 'n') + ".npy"); // 251 bytes
  check_output_file(npy);
  {
    auto array = npy_sink(npy, 2, 5, 4, 2);
    array->add(images(1));
    array->add(images(1));
    array->finish();
  }
  EXPECT_EQ(read_images(npy).count, 2);
  const std::string png = dir / (std::string(251, 'p') + ".png"); // 255 bytes
  write_png(png, 4, 5, 2, images(1).bytes.data());
  EXPECT_EQ(read_images(png).bytes, images(1).bytes);
  const std::string too_long = dir / std::string(256, 'x');
  EXPECT_NE(error_of([&] {
              check_output_file(too_long);
            }).find("its name is 256 bytes, longer than the 255 a name may have"),
            std::string::npos);
}

// Issue 42, point 5: a run that failed before its first image (an overflow) left a header-only
// .npy.partial and an empty --out-dir. What a run made and finished nothing in is removed; a folder
// that was there stays, and so does a partial that holds images.
TEST(Outputs, NothingFinishedLeavesNothing) {
  TempDir dir;
  npy_sink(dir / "a.npy", 4, 5, 4, 2); // made, then closed without an image
  EXPECT_FALSE(std::filesystem::exists(dir / "a.npy.partial"));
  npy_sink(dir / "b.npy", 4, 5, 4, 2)->add(images(1));
  EXPECT_TRUE(std::filesystem::exists(dir / "b.npy.partial"));
  npy_sink(dir / "b.npy", 4, 5, 4, 2, 1); // resumed, then closed: its image stays
  EXPECT_TRUE(std::filesystem::exists(dir / "b.npy.partial"));
}

TEST(Outputs, AnOutputFolderLeftEmptyIsRemoved) {
  TempDir dir;
  { OutputFolder made(dir / "new"); }
  EXPECT_FALSE(std::filesystem::exists(dir / "new"));
  std::filesystem::create_directories(dir / "old");
  { OutputFolder there(dir / "old"); }
  EXPECT_TRUE(std::filesystem::exists(dir / "old"));
  {
    OutputFolder made(dir / "kept");
    png_folder_sink(dir / "kept", 5, 4, 2, image_png_name)->add(images(1));
  }
  EXPECT_TRUE(std::filesystem::exists(dir / "kept/00000000.png"));
}

// Issue 42, point 5: --out-dir /proc said "its disk has 0 bytes free" (as root, access() says
// yes): a folder no file can be made in is not a writable folder, and an output in it is refused.
TEST(Outputs, AFolderNoFileCanBeMadeInIsNotWritable) {
  EXPECT_NE(error_of([] { make_output_folder("/proc"); }).find("/proc: not a writable folder ("),
            std::string::npos);
  EXPECT_NE(error_of([] { check_output_file("/proc/grid.png"); }).find("/proc/grid.png: cannot "),
            std::string::npos);
}
