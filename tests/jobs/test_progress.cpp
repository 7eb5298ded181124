// ProgressText (include/tarnn/progress.h): tqdm's bar on a terminal, plain lines elsewhere, an ETA
// that is never 0 while work remains, and a last line with the summary's rounding. Pure functions
// of (done, total, seconds): no clock is read here.
#include <gtest/gtest.h>

#include <cstdlib>

#include "tarnn/error.h"
#include "tarnn/progress.h"

namespace tarnn {
namespace {

TEST(Progress, ATerminalGetsTqdmsBarRedrawnInPlace) {
  ProgressText t("images", true, 0);
  // 24 of 64 in 3 s: 37.5% is 30 eighths of ten cells (three full, one of six eighths), 8 images/s,
  // 40 left: 5 s
  EXPECT_EQ(t.update(24, 64, 3.0), "\r 37%|███▊      | 24/64 [00:03<00:05, 8.00 images/s]");
  EXPECT_EQ(t.update(0, 64, 0.5),
            "\r  0%|          | 0/64 [00:00<?, 0.00 images/s]     "); // blanks the longer bar
  EXPECT_EQ(t.update(4000, 4096, 3725.0),                             // an hour: h:mm:ss, as tqdm
            "\r 97%|█████████▊| 4000/4096 [1:02:05<01:30, 1.07 images/s]");
  EXPECT_EQ(t.update(64, 64, 9.0), ""); // the end is finish's, with the summary's figures
  EXPECT_EQ(t.finish(64, 8.126), "\r100%|██████████| 64/64 [8.13 s, 7.88 images/s]           \n");
}

TEST(Progress, TheEtaIsNeverZeroWhileWorkRemains) {
  // a log showed "33/48 ... ETA 0:00:00": 15 images at 16.5 a second is 0.9 s, rounded up
  ProgressText log("images", false, 1.0);
  EXPECT_EQ(log.update(33, 48, 2.0), "33/48 images  16.50 images/s  ETA 0:00:01\n");
  ProgressText bar("images", true, 0);
  EXPECT_EQ(bar.update(47.999, 48, 100.0), "\r 99%|█████████▉| 47/48 [01:40<00:01, 0.48 images/s]");
}

TEST(Progress, AFileGetsALineEveryIntervalWithoutCarriageReturns) {
  ProgressText t("completions", false, 10.0);
  EXPECT_EQ(t.update(0, 8, 0.1), ""); // within 10 s of the start
  EXPECT_EQ(t.update(2, 8, 10.0), "2/8 completions  0.20 completions/s  ETA 0:00:30\n");
  EXPECT_EQ(t.update(3, 8, 19.9), ""); // within 10 s of the last line
  EXPECT_EQ(t.update(3, 8, 20.2), "3/8 completions  0.15 completions/s  ETA 0:00:34\n");
  EXPECT_EQ(t.update(8, 8, 22.0), "");
  // the last line's seconds and rate rounded as the summary's "in %.2f s (%.2f completions/s)"
  EXPECT_EQ(t.finish(8, 22.346), "8/8 completions  0.36 completions/s  in 22.35 s\n");
  // a job shorter than the interval writes nothing to a log; one as long, its last line
  ProgressText quick("images", false, 10.0);
  EXPECT_EQ(quick.update(1, 2, 3.0), "");
  EXPECT_EQ(quick.finish(2, 6.0), "");
  ProgressText slow("images", false, 10.0);
  EXPECT_EQ(slow.finish(2, 10.0), "2/2 images  0.20 images/s  in 10.00 s\n");
}

TEST(Progress, TheIntervalComesFromTheEnvironmentOrIsTqdms) {
  ::unsetenv("TARNN_PROGRESS_SECONDS");
  EXPECT_EQ(progress_interval(), 10.0);
  ::setenv("TARNN_PROGRESS_SECONDS", "0.5", 1);
  EXPECT_EQ(progress_interval(), 0.5);
  for (const char *bad : {"soon", "0", "-1", "1e9", ""}) {
    ::setenv("TARNN_PROGRESS_SECONDS", bad, 1);
    EXPECT_THROW(progress_interval(), Error) << bad;
  }
  ::unsetenv("TARNN_PROGRESS_SECONDS");
}

} // namespace
} // namespace tarnn
