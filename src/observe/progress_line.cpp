// See include/ppstage/observe/progress_line.h.
#include "ppstage/observe/progress_line.h"
#include "ppstage/core/clock.h"
#include "ppstage/core/environment.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <string>

namespace ppstage {
namespace {

// "0:07", "12:30", "1:02:03".
std::string clockText(double seconds) {
  const auto total = static_cast<long long>(seconds + 0.5);
  char text[32];
  if (total >= 3600) {
    std::snprintf(text, sizeof(text), "%lld:%02lld:%02lld", total / 3600, total / 60 % 60,
                  total % 60);
  } else {
    std::snprintf(text, sizeof(text), "%lld:%02lld", total / 60, total % 60);
  }
  return text;
}

// The terminal device behind file descriptor 1 of process `pid`, if any ("/dev/pts/3").
bool fdOneIsTerminal(pid_t pid) {
  const std::string link = "/proc/" + std::to_string(pid) + "/fd/1";
  char target[256] = {};
  const ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
  if (n <= 0) return false;
  const std::string path(target, static_cast<size_t>(n));
  return path.rfind("/dev/pts/", 0) == 0 || path.rfind("/dev/tty", 0) == 0;
}

}  // namespace

bool stdoutIsTerminal() {
  if (::isatty(STDOUT_FILENO) == 0) return false;
  // OpenMPI gives its ranks pseudo-terminals; mpirun (the parent of local ranks) holds
  // the real stdout.
  if (environment::underOpenMpi()) return fdOneIsTerminal(::getppid());
  return true;
}

ProgressLine::ProgressLine(std::ostream& out, int64_t first_step, int64_t steps, std::string unit)
    : out_(out), first_step_(first_step), steps_(steps), unit_(std::move(unit)) {}

void ProgressLine::update(int64_t step, double loss, double seconds, int64_t tokens) {
  const Clock::time_point now = Clock::now();
  const bool last = step + 1 == steps_;
  if (drawn_ && !last && now - drawn_at_ < std::chrono::milliseconds(100)) return;
  const double elapsed = secondsBetween(start_, now);
  const auto done = static_cast<double>(step + 1 - first_step_);
  const double eta = elapsed / done * static_cast<double>(steps_ - step - 1);
  std::ostringstream line;
  line << "step " << step + 1 << "/" << steps_ << "  loss " << std::fixed << std::setprecision(4)
       << loss << "  " << unit_ << "/s " << std::setprecision(0)
       << static_cast<double>(tokens) / seconds << "  elapsed " << clockText(elapsed) << "  eta "
       << clockText(eta);
  out_ << "\r" << line.str() << "\x1b[K" << std::flush;  // ESC[K: erase to the line's end
  drawn_ = true;
  drawn_at_ = now;
}

void ProgressLine::clear() {
  if (!drawn_) return;
  out_ << "\r\x1b[K" << std::flush;
  drawn_ = false;
}

}  // namespace ppstage
