// Images and outputs: undecodable PNGs are errors, every image tarnn writes it reads back, and a
// write either completes or leaves the old file, with no temporary behind (issue 12, defects 1,
// 2 and 7).
#include <climits>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <termios.h>
#include <thread>
#include <tuple>
#include <unistd.h>

#include "src/io/files.h"
#include "tarnn/tarnn.h"
#include "test_util.h"

using namespace tarnn;
using namespace tarnn_test;

namespace {

// 71 bytes: a 28x28 grayscale PNG whose one deflate block has the reserved type 3. stb fails on
// it without a reason (a NULL), which was appended to a std::string: SIGSEGV in score and in
// complete --mask.
const unsigned char kReservedDeflateBlock[71] = {
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
    0x52, 0x00, 0x00, 0x00, 0x1c, 0x00, 0x00, 0x00, 0x1c, 0x08, 0x00, 0x00, 0x00, 0x00, 0x57,
    0x66, 0x80, 0x48, 0x00, 0x00, 0x00, 0x0e, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x07, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xac, 0x51, 0x7d, 0x0b, 0x00,
    0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82};

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

// Files in `dir` whose name holds ".tmp".
int temporaries(const TempDir &dir) {
  int n = 0;
  for (const auto &e : std::filesystem::directory_iterator(dir.path))
    n += contains(e.path().filename().string(), ".tmp");
  return n;
}

} // namespace

TEST(Images, UndecodablePngIsAnErrorNotACrash) {
  TempDir dir;
  write_file(dir / "bad.png",
             std::vector<char>(std::begin(kReservedDeflateBlock), std::end(kReservedDeflateBlock)));
  const std::string e = error_of([&] { read_images(dir / "bad.png", Config::mnist()); });
  EXPECT_TRUE(contains(e, "bad.png: cannot decode PNG (")) << e;
  MaskSpec m;
  m.png = dir / "bad.png";
  const std::string em = error_of([&] { make_mask(m, Config::mnist()); });
  EXPECT_TRUE(contains(em, "bad.png: cannot decode PNG (")) << em;
}

// Issue 12: a 2-channel model's samples were refused by score ("PNG has 1 channel").
TEST(Images, EveryChannelCountRoundTrips) {
  TempDir dir;
  for (int c = 1; c <= 4; ++c) {
    Config cfg;
    cfg.height = 5;
    cfg.width = 3;
    cfg.channels = c;
    std::vector<uint8_t> px(size_t(5 * 3 * c));
    for (size_t i = 0; i < px.size(); ++i)
      px[i] = uint8_t(i * 37 + c);
    const std::string path = dir / ("c" + std::to_string(c) + ".png");
    write_png(path, 3, 5, c, px.data());
    const ImageSet back = read_images(path, cfg);
    EXPECT_EQ(back.bytes, px) << c << " channels";
  }
  // a gray-with-alpha PNG still reads for a gray model (alpha ignored), RGBA for RGB
  Config gray;
  gray.height = 5, gray.width = 3, gray.channels = 1;
  EXPECT_EQ(read_images(dir / "c2.png", gray).channels, 1);
  gray.channels = 3;
  EXPECT_EQ(read_images(dir / "c4.png", gray).channels, 3);
  // a refusal names the channels the PNG stores, alpha included (RGBA was reported as 3)
  gray.channels = 1;
  const std::string e = error_of([&] { read_images(dir / "c4.png", gray); });
  EXPECT_TRUE(contains(e, "PNG has 4 channels (RGB and alpha), the model wants 1")) << e;
  gray.channels = 3;
  const std::string e2 = error_of([&] { read_images(dir / "c2.png", gray); });
  EXPECT_TRUE(contains(e2, "PNG has 2 channels (gray and alpha), the model wants 3")) << e2;
}

// One rule for output names, the command's and Python's: the extension in any case.
TEST(Images, PngNamesAreMatchedInAnyCase) {
  EXPECT_TRUE(has_extension("grid.PNG", ".png"));
  EXPECT_TRUE(has_extension("a.Npy", ".npy"));
  EXPECT_FALSE(has_extension("grid.jpg", ".png"));
  EXPECT_FALSE(has_extension("png", ".png"));
  TempDir dir;
  const uint8_t px[4] = {1, 2, 3, 4};
  write_png(dir / "upper.PNG", 2, 2, 1, px);
  EXPECT_EQ(read_images(dir / "upper.PNG").count, 1);
  const std::string e = error_of([&] { write_png(dir / "a.jpg", 2, 2, 1, px); });
  EXPECT_TRUE(contains(e, "must end in .png")) << e;
  EXPECT_FALSE(std::filesystem::exists(dir / "a.jpg"));
}

TEST(Images, ReadingAFolderIsAnErrorNamingIt) {
  TempDir dir;
  const std::string e = error_of([&] { read_images(dir.path.string(), Config::mnist()); });
  EXPECT_TRUE(contains(e, "is a folder")) << e;
}

// Issue 12, defect 1: stb ignored write errors and the truncated temporary replaced a good file.
// A file-size limit makes writes fail (EFBIG) as a full disk does (ENOSPC): same path in the code.
TEST(AtomicWrite, FailedWriteKeepsTheOldFileAndLeavesNoTemporary) {
  TempDir dir;
  const std::string path = dir / "out.png";
  write_file_atomic(path, std::string("old contents"));
  std::signal(SIGXFSZ, SIG_IGN); // the write returns EFBIG instead of killing the process
  rlimit old{};
  getrlimit(RLIMIT_FSIZE, &old);
  rlimit small = old;
  small.rlim_cur = 4096;
  setrlimit(RLIMIT_FSIZE, &small);
  const std::vector<uint8_t> big(100000, 7);
  const std::string e = error_of([&] { write_file_atomic(path, big.data(), big.size()); });
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, SIG_DFL);
  EXPECT_TRUE(contains(e, path + ": cannot write") && contains(e, "too large")) << e;
  const std::vector<char> now = tarnn_test::read_file(path);
  EXPECT_EQ(std::string(now.begin(), now.end()), "old contents");
  EXPECT_EQ(temporaries(dir), 0);
}

TEST(AtomicWrite, MissingFolderIsAnErrorNamingThePath) {
  TempDir dir;
  const std::string e = error_of([&] { write_file_atomic(dir / "no/such/x.png", "x"); });
  EXPECT_TRUE(contains(e, "no/such/x.png: cannot write: No such file or directory")) << e;
}

// Issue 12, defect 7: the temporary was OUT.tmp, followed links, and was shared by two runs.
TEST(AtomicWrite, PlantedLinksAreNeverFollowed) {
  TempDir dir;
  write_file(dir / "victim", {'v'});
  std::filesystem::create_symlink(dir / "victim", dir / "out.png.tmp"); // the old fixed name
  write_file_atomic(dir / "out.png", std::string("new"));
  EXPECT_EQ(tarnn_test::read_file(dir / "victim"), std::vector<char>{'v'});
  EXPECT_EQ(tarnn_test::read_file(dir / "out.png"), (std::vector<char>{'n', 'e', 'w'}));
}

// Issue 42, point 4: an output that is a link was replaced by a file (a link to /proc/self/fd/1
// swallowed the JSON meant for stdout). A link is followed, through a chain of them, relative ones
// from their own folder, and the file it names is written atomically; the links stay.
TEST(AtomicWrite, ALinkIsFollowedToTheFileItNames) {
  TempDir dir;
  std::filesystem::create_directories(dir / "real");
  std::filesystem::create_directories(dir / "sub");
  write_file(dir / "real/c.json", {'o', 'l', 'd'});
  std::filesystem::create_symlink("b", dir / "out.json");           // relative, in dir
  std::filesystem::create_symlink("sub/../real/c.json", dir / "b"); // relative, through a folder
  write_file_atomic(dir / "out.json", std::string("new"));
  EXPECT_EQ(tarnn_test::read_file(dir / "real/c.json"), (std::vector<char>{'n', 'e', 'w'}));
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "out.json"));
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "b"));
  EXPECT_EQ(temporaries(dir), 0);
  // a link to a file not there yet makes it; a loop of links is an error
  std::filesystem::create_symlink("real/new.json", dir / "dangling");
  write_file_atomic(dir / "dangling", std::string("x"));
  EXPECT_EQ(tarnn_test::read_file(dir / "real/new.json"), std::vector<char>{'x'});
  std::filesystem::create_symlink("loop2", dir / "loop1");
  std::filesystem::create_symlink("loop1", dir / "loop2");
  EXPECT_TRUE(contains(error_of([&] { write_file_atomic(dir / "loop1", std::string("x")); }),
                       "a chain of more than 40 symbolic links"));
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "loop1"));
}

// ... and a device, a FIFO, a terminal or a descriptor is written into, never replaced (onto a
// character device the rename left a 648-byte regular file in its place).
TEST(AtomicWrite, ADeviceAFifoOrADescriptorIsWrittenInto) {
  TempDir dir;
  const std::string text = "{\"a\": 1}\n";
  auto is = [](const std::string &path, mode_t kind) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 && (st.st_mode & S_IFMT) == kind;
  };
  auto drain = [](int fd) { // what is in a pipe or a FIFO now (the writer has finished)
    std::string got(4096, '\0');
    const ssize_t n = ::read(fd, got.data(), got.size());
    got.resize(size_t(std::max<ssize_t>(n, 0)));
    return got;
  };
  // a FIFO, its reader open before the write and reading after it
  const std::string fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  write_file_atomic(fifo, text);
  EXPECT_EQ(drain(reader), text);
  EXPECT_TRUE(is(fifo, S_IFIFO));
  ::close(reader);
  // a terminal (a pseudo-terminal's other side, raw: no newline translation)
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(::grantpt(master), 0);
  ASSERT_EQ(::unlockpt(master), 0);
  const std::string tty = ::ptsname(master);
  const int slave = ::open(tty.c_str(), O_RDWR | O_NOCTTY);
  termios raw{};
  ::tcgetattr(slave, &raw);
  ::cfmakeraw(&raw);
  ::tcsetattr(slave, TCSANOW, &raw);
  write_file_atomic(tty, text);
  EXPECT_EQ(drain(master), text);
  EXPECT_TRUE(is(tty, S_IFCHR));
  ::close(slave);
  ::close(master);
  // a link to a descriptor (as /dev/stdout is to /proc/self/fd/1), here a pipe's
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  std::filesystem::create_symlink("/proc/self/fd/" + std::to_string(pipe_fds[1]), dir / "out");
  write_file_atomic(dir / "out", text);
  EXPECT_EQ(drain(pipe_fds[0]), text);
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "out"));
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  // a character device of its own (/dev/null's numbers), where this user may make one
  const std::string null = dir / "null";
  if (::mknod(null.c_str(), S_IFCHR | 0666, ::makedev(1, 3)) == 0) {
    write_file_atomic(null, text);
    EXPECT_TRUE(is(null, S_IFCHR));
  }
  EXPECT_EQ(temporaries(dir), 0);
}

// Issue 42, point 5: a name of 244 to 255 bytes failed, its temporary's name (12 bytes more) being
// too long. Every output name has companions whose names fit, different ones for different names.
TEST(AtomicWrite, NamesOfAnyLengthHaveTemporaries) {
  TempDir dir;
  for (size_t length : {243, 244, 250, 255}) {
    const std::string name = dir / std::string(length, 'a');
    write_file_atomic(name, std::string("x"));
    EXPECT_EQ(tarnn_test::read_file(name), std::vector<char>{'x'}) << length;
  }
  EXPECT_EQ(temporaries(dir), 0);
}

// An output's companions (its temporary, an .npy's partial and record): names that fit, cut
// between UTF-8 characters, different for different names; a link's is beside the file it names.
TEST(AtomicWrite, CompanionNamesFit) {
  // UTF-8 names are shortened between characters ("é" is 2 bytes), keeping the suffix
  const std::string long_a = "/d/" + std::string(100, 'a') + std::string(154, '\xc3') + "x";
  std::string accents;
  for (int i = 0; i < 127; ++i)
    accents += "\xc3\xa9";
  for (const std::string &path : {long_a, "/d/" + accents, "/d/" + accents + "b"}) {
    const std::string c = companion_path(path, ".tmp-XXXXXX", true);
    EXPECT_LE(c.size() - 3, size_t(NAME_MAX)) << c;
    EXPECT_EQ(c.substr(c.size() - 11), ".tmp-XXXXXX");
    EXPECT_EQ(c.substr(0, 4), "/d/.");
  }
  const std::string c = companion_path("/d/" + accents, ".partial");
  EXPECT_EQ((uint8_t(c[c.find('~') - 1]) & 0xc0), 0x80) << "cut inside a character"; // é's end
  EXPECT_NE(companion_path("/d/" + accents, ".partial"),
            companion_path("/d/" + accents + "b", ".partial"));
  EXPECT_EQ(companion_path("a.npy", ".partial"), "a.npy.partial"); // short names: as they were
  EXPECT_EQ(companion_path("d/a.png", ".tmp", true), "d/.a.png.tmp");
  TempDir dir;
  std::filesystem::create_symlink("b", dir / "a");
  std::filesystem::create_symlink("sub/../c.json", dir / "b");
  EXPECT_EQ(output_target(dir / "a").path, dir / "sub/../c.json");
  EXPECT_FALSE(output_target(dir / "a").stream);
  EXPECT_TRUE(output_target("/dev/null").stream);
  EXPECT_FALSE(output_target(dir / "new").stream);
}

TEST(AtomicWrite, ConcurrentWritersOfOnePathEachLandWhole) {
  TempDir dir;
  const std::string a(300000, 'a'), b(200000, 'b');
  for (int round = 0; round < 20; ++round) {
    std::thread t1([&] { write_file_atomic(dir / "same.png", a); });
    std::thread t2([&] { write_file_atomic(dir / "same.png", b); });
    t1.join();
    t2.join();
    const std::vector<char> got = tarnn_test::read_file(dir / "same.png");
    const std::string s(got.begin(), got.end());
    ASSERT_TRUE(s == a || s == b) << "a mix of " << s.size() << " bytes";
  }
  EXPECT_EQ(temporaries(dir), 0);
}

TEST(AtomicWrite, OutputsAreOrdinaryFiles) {
  TempDir dir;
  write_file_atomic(dir / "f", std::string("x"));
  const auto perms = std::filesystem::status(dir / "f").permissions();
  EXPECT_NE(perms & std::filesystem::perms::owner_read, std::filesystem::perms::none);
  EXPECT_NE(perms & std::filesystem::perms::group_read, std::filesystem::perms::none);
}

// Found by fuzzing: stb allocated what a chunk's length claimed before reading it (a 2 GB malloc
// for a 100-byte file) and inflated image data without a bound. Both are refused before stb.
TEST(Images, LyingPngsAreRefusedBeforeDecoding) {
  TempDir dir;
  std::vector<char> png(std::begin(kReservedDeflateBlock), std::end(kReservedDeflateBlock));
  png[33] = 0x7f; // the IDAT chunk's length: 2 GB
  write_file(dir / "long.png", png);
  const std::string e = error_of([&] { read_images(dir / "long.png", Config::mnist()); });
  EXPECT_TRUE(contains(e, "a chunk runs past the end of the file")) << e;
  // the same lie in a last chunk too short for its header and CRC (fuzzing the mask reader: a
  // 207-byte file made stb allocate 1.9 GB): a valid image, then 11 bytes of a chunk
  std::vector<char> tail(std::begin(kReservedDeflateBlock), std::end(kReservedDeflateBlock));
  tail.resize(tail.size() - 12); // no IEND
  const char part[11] = {0x74, 0x4f, 0x00, 0x50, 'I', 'D', 'A', 'T', 0, 0, 0};
  tail.insert(tail.end(), part, part + 11);
  write_file(dir / "tail.png", tail);
  const std::string t = error_of([&] { read_images(dir / "tail.png", Config::mnist()); });
  EXPECT_TRUE(contains(t, "a chunk runs past the end of the file")) << t;
  // a 28x28 gray image whose data inflates to 10 MB: a deflate bomb, not an image of its size
  const std::vector<uint8_t> zeros(10 << 20, 0);
  std::vector<char> bomb(std::begin(kReservedDeflateBlock), std::begin(kReservedDeflateBlock) + 33);
  const std::vector<uint8_t> z = encode_png(4096, 2560, 1, zeros.data()); // a PNG of 10 MB zeros
  // take its IDAT chunk (after the signature and the 25-byte IHDR)
  const uint32_t len = uint32_t(z[33]) << 24 | uint32_t(z[34]) << 16 | uint32_t(z[35]) << 8 | z[36];
  bomb.insert(bomb.end(), z.begin() + 33, z.begin() + 33 + 12 + len);
  const char iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', char(0xae), 0x42, 0x60, char(0x82)};
  bomb.insert(bomb.end(), iend, iend + 12);
  write_file(dir / "bomb.png", bomb);
  const std::string b = error_of([&] { read_images(dir / "bomb.png", Config::mnist()); });
  EXPECT_TRUE(contains(b, "corrupt, or larger than an image of its size")) << b;
}

// An empty image is not "too large" (as 0x0 was called): the message says what a PNG needs.
TEST(Images, AnEmptyOrOddImageIsRefusedForWhatItIs) {
  const uint8_t px[4] = {};
  for (const std::tuple<int, int, int> &whc :
       {std::tuple{0, 0, 1}, std::tuple{3, 0, 1}, std::tuple{1, 1, 5}}) {
    const std::string e = error_of([&] {
      encode_png(std::get<0>(whc), std::get<1>(whc), std::get<2>(whc), px);
    }); // (clang 14 captures no structured binding)
    EXPECT_TRUE(contains(e, "a PNG has at least 1x1 pixels, of 1 to 4 channels")) << e;
  }
  const std::string big = error_of([&] { encode_png(1 << 30, 4, 4, px); });
  EXPECT_TRUE(contains(big, "too large for one file")) << big;
}
