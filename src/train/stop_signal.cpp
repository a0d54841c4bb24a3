// See stop_signal.h.
#include "stop_signal.h"

#include <signal.h>
#include <unistd.h>

#include <csignal>

namespace ppstage {
namespace {

volatile std::sig_atomic_t g_received = 0;
struct sigaction g_previous_term {};
struct sigaction g_previous_int {};

void writeLine(const char* text) {
  size_t n = 0;
  while (text[n] != '\0') ++n;
  const ssize_t ignored = ::write(STDERR_FILENO, text, n);
  (void)ignored;
}

// Async-signal-safe: only a store, or write(2) and _exit(2).
void onSignal(int signal) {
  if (g_received != 0) {
    writeLine(signal == SIGINT ? "ppstage: second SIGINT, ending now\n"
                               : "ppstage: second SIGTERM, ending now\n");
    ::_exit(128 + signal);
  }
  g_received = signal;
}

}  // namespace

StopSignal::StopSignal() {
  g_received = 0;
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

const char* signalName(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    default: return "a signal";
  }
}

}  // namespace ppstage
