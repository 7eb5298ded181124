// A job's progress as text, by tqdm's rules, for every front end (the command writes it to stderr,
// the Python module to sys.stderr where tqdm is not installed). On a terminal, a bar redrawn in
// place:
//
//    37%|███▋      | 24/64 [00:03<00:05, 7.90 images/s]
//
// and anywhere else (a log file, a batch job's output) a line, never a \r, every `every` seconds:
//
//   24/64 images  7.90 images/s  ETA 0:00:05
//
// The ETA is never 0 while work remains (whole seconds, rounded up). The last line, written by
// finish (in a file: after any other line, or a job of `every` seconds or more; a short job's log
// gets none), carries the job's seconds and rate rounded as its summary prints them ("%.2f"), from
// the same clock, so that the two agree: "64/64 images  7.87 images/s  in 8.13 s".
#pragma once

#include <string>

namespace tarnn {

// How often a progress line goes to a non-terminal: TARNN_PROGRESS_SECONDS (docs/ENVIRONMENT.md),
// else tqdm's 10 s. Throws Error unless it is a number of seconds in (0, 86400].
double progress_interval();

class ProgressText {
public:
  // unit: what is counted ("images", "completions"); terminal: whether the text goes to one.
  ProgressText(std::string unit, bool terminal, double every);
  // The text to write now that `done` of `total` units (fractions of one counting) took
  // `seconds`; "" when nothing is due (a file between its lines, or a job at its end: finish
  // writes that).
  std::string update(double done, double total, double seconds);
  // The last line: `total` units done in `seconds`, ending in a newline.
  std::string finish(double total, double seconds);

private:
  std::string bar(double done, double total, double seconds) const;
  std::string line(double done, double total, double seconds) const;

  std::string unit_;
  bool terminal_;
  double every_;
  double last_ = 0;    // when the last line went to a file (0: the start)
  bool wrote_ = false; // whether one did
  size_t drawn_ = 0;   // the columns of the bar last drawn, blanked by a shorter one
};

} // namespace tarnn
