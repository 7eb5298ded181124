// ProgressText (include/tarnn/progress.h): tqdm's bar and its plain lines.
#include "tarnn/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tarnn/error.h"

namespace tarnn {

namespace {

// tqdm's clock: "03:07", or "1:03:07" past an hour.
std::string interval(double seconds) {
  const long s = long(seconds), h = s / 3600;
  char out[32];
  if (h > 0)
    std::snprintf(out, sizeof out, "%ld:%02ld:%02ld", h, s / 60 % 60, s % 60);
  else
    std::snprintf(out, sizeof out, "%02ld:%02ld", s / 60, s % 60);
  return out;
}

// Seconds left at the rate so far, in whole seconds rounded up (0 only when nothing is left);
// negative when unknown (nothing done yet).
double seconds_left(double done, double total, double seconds) {
  if (done <= 0 || seconds <= 0)
    return -1;
  return std::ceil((total - done) * seconds / done);
}

// Columns a UTF-8 string takes on a terminal (one per character: the bar's blocks are one wide).
size_t columns(const std::string &s) {
  return size_t(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

} // namespace

double progress_interval() {
  const char *env = std::getenv("TARNN_PROGRESS_SECONDS");
  if (!env)
    return 10.0;
  char *end = nullptr;
  const double s = std::strtod(env, &end);
  if (end == env || *end || !(s > 0 && s <= 86400))
    throw Error(std::string("TARNN_PROGRESS_SECONDS must be a number of seconds in (0, 86400] "
                            "(got '") +
                env + "')");
  return s;
}

ProgressText::ProgressText(std::string unit, bool terminal, double every)
    : unit_(std::move(unit)), terminal_(terminal), every_(every) {}

// " 37%|███▋      | 24/64 [00:03<00:05, 7.90 images/s]": tqdm's ten cells, each in eighths
std::string ProgressText::bar(double done, double total, double seconds) const {
  static const char *const eighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  const double frac = total > 0 ? std::clamp(done / total, 0.0, 1.0) : 1.0;
  const int cells = int(frac * 10 * 8), full = cells / 8, part = cells % 8;
  std::string blocks;
  for (int i = 0; i < full; ++i)
    blocks += "█";
  blocks += eighths[part];
  blocks.append(size_t(10 - full - (part > 0)), ' ');
  const double left = seconds_left(done, total, seconds);
  char head[32], tail[96];
  std::snprintf(head, sizeof head, "%3d%%|", int(std::floor(100 * frac)));
  std::snprintf(tail, sizeof tail, "| %.0f/%.0f [%s<%s, %.2f %s/s]", std::floor(done), total,
                interval(seconds).c_str(), left < 0 ? "?" : interval(left).c_str(),
                seconds > 0 ? done / seconds : 0.0, unit_.c_str());
  return head + blocks + tail;
}

// "24/64 images  7.90 images/s  ETA 0:00:05"
std::string ProgressText::line(double done, double total, double seconds) const {
  const double left = seconds_left(done, total, seconds);
  char eta[32] = "?";
  if (left >= 0) {
    const long s = long(left);
    std::snprintf(eta, sizeof eta, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  }
  char out[160];
  std::snprintf(out, sizeof out, "%.0f/%.0f %s  %.2f %s/s  ETA %s", std::floor(done), total,
                unit_.c_str(), seconds > 0 ? done / seconds : 0.0, unit_.c_str(), eta);
  return out;
}

std::string ProgressText::update(double done, double total, double seconds) {
  if (done >= total)
    return ""; // the end is finish's
  if (!terminal_) {
    if (seconds - last_ < every_)
      return "";
    last_ = seconds;
    wrote_ = true;
    return line(done, total, seconds) + "\n";
  }
  const std::string drawn = bar(done, total, seconds);
  const size_t width = columns(drawn), blank = drawn_ > width ? drawn_ - width : 0;
  drawn_ = width;
  return "\r" + drawn + std::string(blank, ' ');
}

std::string ProgressText::finish(double total, double seconds) {
  char rate[64], out[160];
  std::snprintf(rate, sizeof rate, "%.2f %s/s", seconds > 0 ? total / seconds : 0.0, unit_.c_str());
  if (!terminal_) { // a short job's log gets none, as before its first line
    std::snprintf(out, sizeof out, "%.0f/%.0f %s  %s  in %.2f s\n", total, total, unit_.c_str(),
                  rate, seconds);
    return wrote_ || seconds >= every_ ? out : "";
  }
  std::snprintf(out, sizeof out, "100%%|██████████| %.0f/%.0f [%.2f s, %s]", total, total, seconds,
                rate);
  const size_t width = columns(out), blank = drawn_ > width ? drawn_ - width : 0;
  drawn_ = 0;
  return "\r" + std::string(out) + std::string(blank, ' ') + "\n";
}

} // namespace tarnn
