// See include/ppstage/train/stop_signal.h.
#include "ppstage/train/stop_signal.h"
#include "ppstage/core/environment.h"
#include "ppstage/core/interrupt.h"

#include <signal.h>
#include <stdint.h>
#include <unistd.h>

#include <time.h>

#include <atomic>
#include <csignal>
#include <cstdlib>

namespace ppstage {
namespace {

volatile std::sig_atomic_t g_received = 0;
std::atomic<int64_t> g_received_ns{0};  // lock-free, so async-signal-safe
// One stop can arrive twice within moments (Ctrl-C reaches the process group and mpirun
// passes it on too); only a signal this long after the first ends the process at once.
constexpr int64_t kRepeatAfterNs = 1'000'000'000;
struct sigaction g_previous_term {};
struct sigaction g_previous_int {};

void writeLine(const char* text) {
  size_t n = 0;
  while (text[n] != '\0') ++n;
  const ssize_t ignored = ::write(STDERR_FILENO, text, n);
  (void)ignored;
}

int64_t monotonicNs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe (POSIX)
  return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

// Async-signal-safe: only stores, clock_gettime(2), or write(2) and _exit(2).
void onSignal(int signal) {
  if (g_received != 0) {
    if (monotonicNs() - g_received_ns.load() < kRepeatAfterNs) {
      // Ctrl-C reaches the ranks itself and through mpirun, which passes it on as SIGTERM:
      // whichever comes first, the stop is the user's SIGINT.
      if (signal == SIGINT) g_received = SIGINT;
      return;
    }
    writeLine(signal == SIGINT ? "ppstage: second SIGINT, ending now\n"
                               : "ppstage: second SIGTERM, ending now\n");
    ::_exit(128 + signal);
  }
  g_received_ns.store(monotonicNs());
  g_received = signal;
  requestInterrupt();  // Note [Abandoning a step]
}

}  // namespace

StopSignal::StopSignal() {
  g_received = 0;
  clearInterrupt();
  struct sigaction action {};
  action.sa_handler = onSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, &g_previous_term);
  sigaction(SIGINT, &action, &g_previous_int);
}

StopSignal::~StopSignal() {
  sigaction(SIGTERM, &g_previous_term, nullptr);
  sigaction(SIGINT, &g_previous_int, nullptr);
}

int StopSignal::received() { return g_received; }

int jobStopSignal(const std::vector<double>& per_rank) {
  int stop = 0;
  for (const double s : per_rank) {
    const int signal = static_cast<int>(s);
    if (signal == SIGINT) return SIGINT;
    if (signal != 0) stop = signal;
  }
  return stop;
}

std::string signalNote(int signal) {
  if (signal != SIGTERM || !environment::underOpenMpi()) return "";
  return " (under mpirun, a Ctrl-C reaches the ranks as SIGTERM)";
}

const char* signalName(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    default: return "a signal";
  }
}

}  // namespace ppstage
