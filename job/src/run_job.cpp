#include "ccscope/job/run_job.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "ccscope/collectives/error.h"
#include "ccscope/collectives/rendezvous.h"
#include "ccscope/job/interruption.h"
#include "ccscope/job/wait_policy.h"

namespace ccscope::job {

namespace {

// MPI_Finalize's bound: MpiSession's, or CCSCOPE_FINALIZE_TIMEOUT_S seconds where a test
// environment knows its MPI library can hang there after every result is written (MPICH
// 4.0.2 over UCX on the virtual cluster: ci/tests/vcluster sets 3).
std::chrono::milliseconds finalize_bound() {
  std::string problem;
  const std::chrono::milliseconds bound = finalize_bound_from(
      std::getenv("CCSCOPE_FINALIZE_TIMEOUT_S"), MpiSession::kFinalizeBound, problem);
  if (!problem.empty() && launcher_says_rank_zero())
    std::fprintf(stderr, "ccscope: %s\n", problem.c_str());
  return bound;
}

}  // namespace

// OnSignal::kEndJob: the handlers record the signal (async-signal-safe); this
// thread notices it and ends the job, which a handler cannot do (MPI_Abort is
// not async-signal-safe). The body may be inside any collective meanwhile.
class JobContext::SignalEnder {
 public:
  // `grace`: how long after the signal the job ends (0: at once).
  SignalEnder(const std::string& verb, const World& world, std::chrono::milliseconds grace)
      : verb_(verb), world_(world), grace_(grace), thread_([this] { watch(); }) {}
  ~SignalEnder() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  void watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!done_) {
      // A signal handler cannot notify a condition variable: look every 20 ms.
      wake_.wait_for(lock, std::chrono::milliseconds(20));
      const int signal_number = InterruptHandlers::pending_signal();
      // The watchdog ending the job (a death, a hang) makes the launcher send
      // SIGTERM: its report stands, not "stopped by".
      if (signal_number == 0 || done_ || watchdog_is_ending_job()) continue;
      const auto now = std::chrono::steady_clock::now();
      if (!seen_) seen_ = now;
      if (now - *seen_ < grace_) continue;
      const int code = exit_code_for_signal(signal_number);
      std::fprintf(stderr, "ccscope %s: rank %d (%s): stopped by %s; exit %d\n", verb_.c_str(),
                   world_.rank(), world_.hostname().c_str(), signal_name(signal_number).c_str(),
                   code);
      std::fflush(nullptr);
      watchdog_say_goodbye();  // the abort below is on purpose, not a death
      if (world_.size() == 1) _exit(code);
      // The launcher drops output still in its pipes when the abort arrives
      // (as bench's stop: see benchmark.cpp).
      std::this_thread::sleep_for(std::chrono::seconds(1));
      world_.abort(code);
    }
  }

  std::string verb_;
  const World& world_;
  std::chrono::milliseconds grace_;
  std::optional<std::chrono::steady_clock::time_point> seen_;  // the signal, first noticed
  InterruptHandlers handlers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;  // last: starts once the rest is built
};

JobContext::JobContext(const JobSpec& spec, World world, Launch launch)
    : spec_(spec), world_(std::move(world)), launch_(std::move(launch)) {
  if (spec_.on_signal == OnSignal::kEndJob)
    signal_ender_ = std::make_unique<SignalEnder>(spec_.verb, world_, std::chrono::milliseconds(0));
  else if (spec_.stop_grace.count() > 0)
    signal_ender_ = std::make_unique<SignalEnder>(spec_.verb, world_, spec_.stop_grace);
}

JobContext::~JobContext() {
  watchdog_.reset();  // says goodbye first
  signal_ender_.reset();
}

int JobContext::refuse(const std::string& what) const {
  if (leader()) std::fprintf(stderr, "ccscope %s: error: %s\n", verb().c_str(), what.c_str());
  return kExitUsage;
}

std::string JobContext::open_outputs(const std::function<void()>& open) const {
  std::string error;
  if (leader()) {
    try {
      open();
    } catch (const std::exception& e) {
      error = e.what();
      if (error.empty()) error = "an output could not be opened";
    }
  }
  if (world_.all_reduce_sum(static_cast<int64_t>(error.empty() ? 0 : 1)) == 0) return "";
  // Only rank 0 prints it; the others need to know that it is not empty.
  return leader() ? error : "(refused on rank 0)";
}

std::string JobContext::first_problem(const std::string& problem) const {
  for (const std::string& p : world_.all_gather(problem))
    if (!p.empty()) return p;
  return "";
}

HangWatchdog& JobContext::start_watchdog(std::chrono::milliseconds timeout) {
  try {
    watchdog_ = std::make_unique<HangWatchdog>(world_, timeout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ccscope %s: rank %d (%s): cannot start the watchdog: %s\n",
                 verb().c_str(), world_.rank(), world_.hostname().c_str(), e.what());
    world_.abort(kExitCheckFailed);
  }
  return *watchdog_;
}

void JobContext::end_job(int exit_code, const std::string& what) const {
  std::fprintf(stderr, "ccscope %s: rank %d (%s): %s\n", verb().c_str(), world_.rank(),
               world_.hostname().c_str(), what.c_str());
  watchdog_say_goodbye();  // an exit on purpose, not a death
  world_.abort(exit_code);
}

int JobContext::leave_together(int exit_code) const {
  watchdog_say_goodbye();
  world_.barrier();
  return exit_code;
}

void JobContext::choose_waits() { world_.set_yielding_waits(wait_policy(world_).yield); }

int JobContext::agree_on_exit_code(int exit_code) const {
  std::array<double, 1> code{static_cast<double>(exit_code)};
  world_.all_reduce_max(code);
  return static_cast<int>(code[0]);
}

namespace {

int run_body(const JobSpec& spec, World world, const Launch& launch,
             const std::function<int(JobContext&)>& body) {
  JobContext job(spec, std::move(world), launch);
  try {
    // A bad CCSCOPE_YIELD_WHEN_IDLE is a refusal (rank 0's one line, exit 2),
    // agreed on: a rank leaving alone would leave the others waiting.
    std::string refused;
    try {
      job.choose_waits();
    } catch (const UsageError& e) {
      refused = e.what();
    }
    if (const std::string problem = job.first_problem(refused); !problem.empty())
      return job.refuse(problem);
    if (job.leader() && !launch.note.empty())
      std::fprintf(stderr, "ccscope %s: note: %s\n", spec.verb.c_str(), launch.note.c_str());
    return body(job);
  } catch (const TimeoutError& e) {
    job.end_job(kExitHang, e.what());
  } catch (const UsageError& e) {
    job.end_job(kExitUsage, std::string("error: ") + e.what());
  } catch (const std::exception& e) {
    job.end_job(kExitCheckFailed, std::string("error: ") + e.what());
  }
}

// Before the world exists a rank can only speak for itself: one line, its exit code.
int fail_before_world(const JobSpec& spec, const Launch& launch, int exit_code,
                      const std::string& what) {
  std::fprintf(stderr, "ccscope %s: rank %d: %s\n", spec.verb.c_str(), launch.rank, what.c_str());
  return exit_code;
}

// A launch without MPI: the world meets at the TCP rendezvous of the launcher's
// environment (torchrun, Kubernetes, srun without an MPI plugin).
int run_over_rendezvous(const JobSpec& spec, const Launch& launch,
                        const std::function<int(JobContext&)>& body) {
  RendezvousOptions options;
  options.rank = launch.rank;
  options.size = launch.size;
  options.host = launch.rendezvous_host;
  options.port = launch.rendezvous_port;
  options.timeout = launch.rendezvous_timeout;
  options.source = launch.launcher;
  options.before_abort_exit = [] { watchdog_say_goodbye(); };
  std::shared_ptr<const WorldChannel> channel;
  World world;
  try {
    channel = join_rendezvous(options);
    world = World::from_channel(channel, launch.rank, launch.size, launch.slurm_node_name);
  } catch (const TimeoutError& e) {
    return fail_before_world(spec, launch, kExitHang, e.what());
  } catch (const UsageError& e) {
    return fail_before_world(spec, launch, kExitUsage, std::string("error: ") + e.what());
  } catch (const std::exception& e) {
    return fail_before_world(spec, launch, kExitCheckFailed, std::string("error: ") + e.what());
  }
  return run_body(spec, std::move(world), launch, body);
}

}  // namespace

int run_job(const JobSpec& spec, const std::function<int(JobContext&)>& body) {
  Launch launch;
  try {
    launch = decide_launch([](const char* name) { return std::getenv(name); },
                           mpi_flavor_from_version(MpiSession::library_version()));
  } catch (const UsageError& e) {
    if (launcher_says_rank_zero())
      std::fprintf(stderr, "ccscope %s: error: %s\n", spec.verb.c_str(), e.what());
    return kExitUsage;
  }
  if (launch.kind == LaunchKind::kSlurm || launch.kind == LaunchKind::kTorchrun)
    return run_over_rendezvous(spec, launch, body);
  const std::chrono::milliseconds finalize_within = finalize_bound();  // its line before the run's
  MpiSession session(nullptr, nullptr);
  World world = World::from_mpi(launch.slurm_node_name);
  // A launcher that started N processes which each see a world of one (the
  // mpiexec of another MPI than ccscope's) would run N separate jobs.
  if (launch.kind == LaunchKind::kMpi && world.size() != launch.size) {
    if (world.rank() == 0 && launch.rank == 0)
      std::fprintf(stderr,
                   "ccscope %s: error: the launcher started %d ranks (%s) but MPI sees a world of "
                   "%d: ccscope was built with a different MPI (%s) than the launcher; use that "
                   "MPI's mpiexec or rebuild ccscope against the launcher's MPI\n",
                   spec.verb.c_str(), launch.size, launch.launcher.c_str(), world.size(),
                   MpiSession::library_version().c_str());
    return session.finalize(kExitUsage, finalize_within);
  }
  return session.finalize(run_body(spec, std::move(world), launch, body), finalize_within);
}

bool launcher_says_rank_zero() {
  for (const char* name :
       {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "RANK", "SLURM_PROCID"}) {
    // RANK alone is no launcher's (torchrun and Kubernetes set WORLD_SIZE beside it): a
    // stray RANK must not silence the line that refuses it.
    if (std::string(name) == "RANK" && std::getenv("WORLD_SIZE") == nullptr) continue;
    if (const char* value = std::getenv(name)) return std::string(value) == "0";
  }
  return true;
}

}  // namespace ccscope::job
