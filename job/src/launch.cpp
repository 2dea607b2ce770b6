#include "ccscope/job/launch.h"

#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <utility>

#include "ccscope/collectives/error.h"

// Where each variable comes from (checked against the launchers' sources and documentation):
// - MPICH Hydra (mpiexec): PMI_RANK, PMI_SIZE, PMI_FD (or PMI_PORT with -pmi-port),
//   MPI_LOCALRANKID, MPI_LOCALNRANKS; no PMI_JOBID (a real `mpiexec -n 2 env`, MPICH 4.0.2).
// - Open MPI mpirun (4.1): OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE} and the PMIx
//   client's PMIX_RANK, PMIX_NAMESPACE (a number), PMIX_SERVER_URI* (a real mpirun, 4.1.4).
// - Slurm mpi/pmi2 (src/plugins/mpi/pmi2/mpi_pmi2.c, mpi_p_slurmstepd_task): PMI_FD,
//   PMI_JOBID ("<job id>.<step id>", setup.c), PMI_RANK, PMI_SIZE.
// - Slurm mpi/pmix: PMIx_server_setup_fork's PMIX_RANK, PMIX_NAMESPACE
//   ("slurm.pmix.<job id>.<step id>", pmixp_info.c), PMIX_SERVER_URI*.
// - srun, every task (srun(1) OUTPUT ENVIRONMENT VARIABLES; src/common/env.c
//   env_array_for_step and setup_env): SLURM_JOB_ID, SLURM_STEP_ID (and SLURM_STEPID),
//   SLURM_PROCID, SLURM_STEP_NUM_TASKS (and SLURM_NTASKS), SLURM_LOCALID, SLURM_NODEID,
//   SLURM_STEP_NODELIST, SLURM_STEP_TASKS_PER_NODE ("2(x2),1"), SLURMD_NODENAME.
//   A batch script's shell has SLURM_JOB_ID, SLURM_PROCID=0, SLURM_NODEID=0 but no step
//   variables (setup_env sets SLURM_STEP_ID only for a step id >= 0; the batch script's is
//   SLURM_BATCH_SCRIPT, 0xfffffffb).
// - torchrun (torch/distributed/elastic/agent/server/local_elastic_agent.py,
//   _start_workers): RANK, GROUP_RANK, ROLE_RANK, ROLE_NAME, LOCAL_RANK, LOCAL_WORLD_SIZE,
//   WORLD_SIZE, GROUP_WORLD_SIZE, ROLE_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
//   TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID,
//   TORCHELASTIC_USE_AGENT_STORE.
// - Kubeflow PyTorchJob (training-operator pkg/controller.v1/pytorch/envvar.go): MASTER_ADDR
//   (the master pod's service), MASTER_PORT (23456 unless the port is named), WORLD_SIZE
//   (the replicas), RANK, PYTHONUNBUFFERED; no LOCAL_*.

namespace ccscope::job {
namespace {

[[noreturn]] void refuse(const std::string& line) { throw UsageError(line); }

// The environment; a variable set to "" counts as unset.
class Env {
 public:
  explicit Env(const Getenv& getenv) : getenv_(getenv) {}
  std::optional<std::string> get(const char* name) const {
    const char* value = getenv_ ? getenv_(name) : nullptr;
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
  }
  bool has(const char* name) const { return get(name).has_value(); }
  // The first of `names` that is set: its name and value.
  std::optional<std::pair<const char*, std::string>> first(
      std::initializer_list<const char*> names) const {
    for (const char* name : names)
      if (auto value = get(name)) return std::make_pair(name, *value);
    return std::nullopt;
  }
  const char* first_set_name(std::initializer_list<const char*> names) const {
    for (const char* name : names)
      if (has(name)) return name;
    return nullptr;
  }

 private:
  const Getenv& getenv_;
};

std::optional<long long> parse_integer(std::string_view text) {
  long long value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return value;
}

// `name`=`value` as an integer in [lo, hi], else refused naming the variable.
int number(const char* name, const std::string& value, long long lo, long long hi) {
  const std::optional<long long> n = parse_integer(value);
  if (!n) refuse(std::string(name) + "=" + value + " is not a number");
  if (*n < lo || *n > hi)
    refuse(std::string(name) + "=" + value + " is out of range (" + std::to_string(lo) + ".." +
           std::to_string(hi) + ")");
  return static_cast<int>(*n);
}

// A number where one is welcome but nothing hangs on it (kMpi's local counts).
std::optional<int> lenient_number(const Env& env, const char* name, long long lo) {
  const auto value = env.get(name);
  if (!value) return std::nullopt;
  const std::optional<long long> n = parse_integer(*value);
  if (!n || *n < lo || *n > INT_MAX) return std::nullopt;
  return static_cast<int>(*n);
}

std::string need(const Env& env, const char* name, const std::string& because) {
  auto value = env.get(name);
  if (!value) refuse(because + " but " + name + " is not");
  return *value;
}

// ---- Slurm ----

void fill_slurm_fields(const Env& env, Launch& out) {
  if (auto v = env.first({"SLURM_JOB_ID", "SLURM_JOBID"})) out.slurm_job_id = v->second;
  if (auto v = env.first({"SLURM_STEP_ID", "SLURM_STEPID"})) out.slurm_step_id = v->second;
  if (auto v = env.first({"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}))
    out.slurm_nodelist = v->second;
  if (auto v = env.get("SLURMD_NODENAME")) out.slurm_node_name = *v;
}

struct SlurmStep {
  std::string job_id, step_id, nodelist;
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  std::vector<std::string> hosts;
};

// Whether `step_id` (as Slurm prints it) is an srun job step, not the batch script
// (0xfffffffb), the extern step (0xfffffffc) or salloc's interactive step (0xfffffffa):
// setup_env printed those with %d (negative) and skipped them; any id from
// SLURM_MAX_NORMAL_STEP_ID (0xfffffff0) up is one of them however printed.
bool is_job_step(const char* name, const std::string& step_id) {
  const std::optional<long long> n = parse_integer(step_id);
  if (!n) refuse(std::string(name) + "=" + step_id + " is not a number");
  return *n >= 0 && *n < 0xfffffff0LL;
}

// The srun job step this process is a task of; nullopt outside one (no Slurm, or a batch
// script's own shell). A step with a variable missing or inconsistent is refused.
std::optional<SlurmStep> read_slurm_step(const Env& env) {
  const auto step_var = env.first({"SLURM_STEP_ID", "SLURM_STEPID"});
  if (!step_var) {
    if (const char* marker = env.first_set_name(
            {"SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE"}))
      refuse(std::string(marker) + " is set (a Slurm job step) but SLURM_STEP_ID is not");
    return std::nullopt;
  }
  if (!is_job_step(step_var->first, step_var->second)) return std::nullopt;

  const std::string because = std::string(step_var->first) + " is set (a Slurm job step)";
  SlurmStep step;
  step.step_id = step_var->second;
  const auto job = env.first({"SLURM_JOB_ID", "SLURM_JOBID"});
  if (!job) refuse(because + " but SLURM_JOB_ID is not");
  step.job_id = job->second;
  const std::string procid = need(env, "SLURM_PROCID", because);
  const auto ntasks = env.first({"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"});
  if (!ntasks) refuse(because + " but SLURM_STEP_NUM_TASKS is not");
  const std::string localid = need(env, "SLURM_LOCALID", because);
  const std::string nodeid = need(env, "SLURM_NODEID", because);
  step.nodelist = need(env, "SLURM_STEP_NODELIST", because);
  const std::string per_node = need(env, "SLURM_STEP_TASKS_PER_NODE", because);

  step.size = number(ntasks->first, ntasks->second, 1, INT_MAX);
  step.rank = number("SLURM_PROCID", procid, 0, INT_MAX);
  if (step.rank >= step.size)
    refuse("SLURM_PROCID=" + procid + " is not below " + ntasks->first + "=" + ntasks->second);
  const int node = number("SLURM_NODEID", nodeid, 0, INT_MAX);
  step.local_rank = number("SLURM_LOCALID", localid, 0, INT_MAX);

  std::vector<int> tasks;
  try {
    tasks = expand_slurm_tasks_per_node(per_node);
  } catch (const UsageError& e) {
    refuse(std::string("SLURM_STEP_TASKS_PER_NODE: ") + e.what());
  }
  long long total = 0;
  for (int t : tasks) total += t;
  if (total != step.size)
    refuse("SLURM_STEP_TASKS_PER_NODE=" + per_node + " adds up to " + std::to_string(total) +
           " tasks, not " + ntasks->first + "=" + ntasks->second);
  try {
    step.hosts = expand_slurm_hostlist(step.nodelist);
  } catch (const UsageError& e) {
    refuse(std::string("SLURM_STEP_NODELIST: ") + e.what());
  }
  if (step.hosts.size() != tasks.size())
    refuse("SLURM_STEP_NODELIST=" + step.nodelist + " names " + std::to_string(step.hosts.size()) +
           " nodes but SLURM_STEP_TASKS_PER_NODE=" + per_node + " gives tasks to " +
           std::to_string(tasks.size()));
  if (static_cast<size_t>(node) >= tasks.size())
    refuse("SLURM_NODEID=" + nodeid + " is not below the " + std::to_string(tasks.size()) +
           " nodes of SLURM_STEP_TASKS_PER_NODE=" + per_node);
  step.local_size = tasks[node];
  if (step.local_rank >= step.local_size)
    refuse("SLURM_LOCALID=" + localid + " is not below the " + std::to_string(step.local_size) +
           " tasks SLURM_STEP_TASKS_PER_NODE=" + per_node + " gives node SLURM_NODEID=" + nodeid);
  return step;
}

// ---- MPI launchers ----

enum class WireUp { kOmpiMpirun, kPmi, kPmix };

struct MpiLauncher {
  WireUp wire;
  std::string launcher;
  std::string marker;        // the variable that shows it, for messages
  bool srun_plugin = false;  // srun's own mpi plugin for this very step
  int rank = 0, size = -1, local_rank = -1, local_size = -1;
};

bool speaks(MpiFlavor mpi, WireUp wire) {
  switch (mpi) {
    case MpiFlavor::kNone:
      return false;
    case MpiFlavor::kMpich:
      return wire == WireUp::kPmi;
    case MpiFlavor::kOpenMpi:
      return wire != WireUp::kPmi;
    case MpiFlavor::kOther:
      return true;
  }
  return false;
}

const char* wire_name(WireUp wire) {
  switch (wire) {
    case WireUp::kOmpiMpirun:
      return "PMIx";
    case WireUp::kPmi:
      return "PMI-1/PMI-2";
    case WireUp::kPmix:
      return "PMIx";
  }
  return "?";
}

// A task's local rank and count from srun's variables, where they read cleanly.
void local_from_slurm(const Env& env, MpiLauncher& m) {
  if (auto local = lenient_number(env, "SLURM_LOCALID", 0)) m.local_rank = *local;
  const auto node = lenient_number(env, "SLURM_NODEID", 0);
  const auto per_node = env.get("SLURM_STEP_TASKS_PER_NODE");
  if (!node || !per_node) return;
  try {
    const std::vector<int> tasks = expand_slurm_tasks_per_node(*per_node);
    if (static_cast<size_t>(*node) < tasks.size()) m.local_size = tasks[*node];
  } catch (const UsageError&) {
  }
}

void check_rank(const char* rank_name, const std::string& rank, const char* size_name,
                const std::string& size, MpiLauncher& m) {
  m.size = number(size_name, size, 1, INT_MAX);
  m.rank = number(rank_name, rank, 0, INT_MAX);
  if (m.rank >= m.size)
    refuse(std::string(rank_name) + "=" + rank + " is not below " + size_name + "=" + size);
}

// The MPI launcher whose variables this process has; nullopt for none. Partial sets are
// refused. Open MPI's mpirun first (it sets PMIX_* too), then PMI-1/2 (Hydra, or
// srun --mpi=pmi2), then PMIx (srun --mpi=pmix, or another PMIx launcher).
std::optional<MpiLauncher> read_mpi_launcher(const Env& env, MpiFlavor mpi,
                                             const std::string& job_id,
                                             const std::string& step_id) {
  const std::string this_step = job_id.empty() || step_id.empty() ? "" : job_id + "." + step_id;
  if (const char* marker =
          env.first_set_name({"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                              "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"})) {
    const std::string because = std::string(marker) + " is set (Open MPI's mpirun)";
    MpiLauncher m{WireUp::kOmpiMpirun, "mpirun (Open MPI, PMIx)", marker};
    const std::string rank = need(env, "OMPI_COMM_WORLD_RANK", because);
    const std::string size = need(env, "OMPI_COMM_WORLD_SIZE", because);
    check_rank("OMPI_COMM_WORLD_RANK", rank, "OMPI_COMM_WORLD_SIZE", size, m);
    if (auto v = env.get("OMPI_COMM_WORLD_LOCAL_SIZE"))
      m.local_size = number("OMPI_COMM_WORLD_LOCAL_SIZE", *v, 1, m.size);
    if (auto v = env.get("OMPI_COMM_WORLD_LOCAL_RANK")) {
      m.local_rank = number("OMPI_COMM_WORLD_LOCAL_RANK", *v, 0, m.size - 1);
      if (m.local_size > 0 && m.local_rank >= m.local_size)
        refuse("OMPI_COMM_WORLD_LOCAL_RANK=" + *v +
               " is not below OMPI_COMM_WORLD_LOCAL_SIZE=" + std::to_string(m.local_size));
    }
    return m;
  }
  if (const char* marker = env.first_set_name({"PMI_RANK", "PMI_SIZE", "PMI_FD", "PMI_PORT"})) {
    const std::string because = std::string(marker) + " is set (an MPI launcher's PMI wire-up)";
    const auto jobid = env.get("PMI_JOBID");
    const bool srun = !this_step.empty() && jobid && *jobid == this_step;
    MpiLauncher m{WireUp::kPmi, srun ? "srun --mpi=pmi2" : "mpiexec (Hydra, PMI-1)", marker, srun};
    const std::string rank = need(env, "PMI_RANK", because);
    const std::string size = need(env, "PMI_SIZE", because);
    check_rank("PMI_RANK", rank, "PMI_SIZE", size, m);
    // MPICH's PMI client reaches its launcher over PMI_FD or PMI_PORT; without either it
    // starts as a singleton, each rank alone.
    if (mpi == MpiFlavor::kMpich && !env.has("PMI_FD") && !env.has("PMI_PORT"))
      refuse(because +
             " but neither PMI_FD nor PMI_PORT is: MPICH reaches its launcher "
             "through one of them");
    if (srun) {
      local_from_slurm(env, m);
    } else {
      if (auto v = lenient_number(env, "MPI_LOCALRANKID", 0)) m.local_rank = *v;
      if (auto v = lenient_number(env, "MPI_LOCALNRANKS", 1)) m.local_size = *v;
    }
    return m;
  }
  if (const char* marker = env.first_set_name({"PMIX_RANK", "PMIX_NAMESPACE"})) {
    const std::string because = std::string(marker) + " is set (a PMIx launcher)";
    const std::string nspace = need(env, "PMIX_NAMESPACE", because);
    const std::string rank = need(env, "PMIX_RANK", because);
    const bool srun = !this_step.empty() && nspace == "slurm.pmix." + this_step;
    MpiLauncher m{WireUp::kPmix, srun ? "srun --mpi=pmix" : "PMIx launcher", marker, srun};
    m.rank = number("PMIX_RANK", rank, 0, INT_MAX);
    if (srun) {
      // PMIx gives no world size in the environment; srun does.
      if (auto n = env.first({"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"})) {
        m.size = number(n->first, n->second, 1, INT_MAX);
        if (m.rank >= m.size)
          refuse("PMIX_RANK=" + rank + " is not below " + n->first + "=" + n->second);
      }
      local_from_slurm(env, m);
    }
    return m;
  }
  return std::nullopt;
}

std::string flavor_suggestion(MpiFlavor mpi) {
  switch (mpi) {
    case MpiFlavor::kMpich:
      return "start it with MPICH's mpiexec or srun --mpi=pmi2";
    case MpiFlavor::kOpenMpi:
      return "start it with Open MPI's mpirun or srun --mpi=pmix";
    default:
      return "start it with srun or torchrun";
  }
}

// ---- ccscope's own variables ----

std::optional<int> rendezvous_port_override(const Env& env) {
  if (auto v = env.get("CCSCOPE_RENDEZVOUS_PORT"))
    return number("CCSCOPE_RENDEZVOUS_PORT", *v, 1, 65535);
  return std::nullopt;
}

std::chrono::seconds rendezvous_timeout(const Env& env) {
  if (auto v = env.get("CCSCOPE_RENDEZVOUS_TIMEOUT"))
    return std::chrono::seconds(number("CCSCOPE_RENDEZVOUS_TIMEOUT", *v, 1, INT_MAX));
  return std::chrono::seconds(60);
}

// ---- the kinds ----

void as_slurm(const Env& env, const SlurmStep& step, Launch& out) {
  out.kind = LaunchKind::kSlurm;
  if (out.launcher.empty()) out.launcher = "srun (Slurm environment)";
  out.rank = step.rank;
  out.size = step.size;
  out.local_rank = step.local_rank;
  out.local_size = step.local_size;
  // Task 0 runs on the step's first node under srun's block, cyclic and plane
  // distributions (node index order). It need not under --distribution=arbitrary
  // (SLURM_HOSTFILE's first line; slurm_step_layout.c _task_layout_hostfile) or a topology
  // plugin's order ("tasks are distributed following topology order", srun(1)): task 0
  // knows its node (SLURMD_NODENAME) and refuses below, and CCSCOPE_RENDEZVOUS_HOST says
  // where it is. The name is Slurm's NodeName; where that does not resolve (NodeHostname
  // or NodeAddr differ), CCSCOPE_RENDEZVOUS_HOST too.
  const auto host_override = env.get("CCSCOPE_RENDEZVOUS_HOST");
  out.rendezvous_host = host_override ? *host_override : step.hosts.front();
  if (!host_override && step.rank == 0 && !out.slurm_node_name.empty() &&
      out.slurm_node_name != step.hosts.front())
    refuse("SLURM_PROCID=0 runs on SLURMD_NODENAME=" + out.slurm_node_name +
           ", not on the first node of SLURM_STEP_NODELIST=" + step.nodelist + " (" +
           step.hosts.front() + ") where the other tasks look for it: set " +
           "CCSCOPE_RENDEZVOUS_HOST to " + out.slurm_node_name + "'s address");
  const auto port = rendezvous_port_override(env);
  out.rendezvous_port = port ? *port : slurm_rendezvous_port(step.job_id, step.step_id);
}

void as_torchrun(const Env& env, Launch& out) {
  const bool elastic = env.has("TORCHELASTIC_RUN_ID");
  const char* trigger = elastic ? "TORCHELASTIC_RUN_ID" : env.has("RANK") ? "RANK" : "WORLD_SIZE";
  const std::string because =
      std::string(trigger) +
      (elastic ? " is set (a torchrun worker)" : " is set (torchrun/Kubernetes launch)");
  const std::string rank = need(env, "RANK", because);
  const std::string world = need(env, "WORLD_SIZE", because);
  const std::string addr = env.get("MASTER_ADDR").value_or("");
  if (addr.empty())
    refuse(because + " but MASTER_ADDR is not: torchrun and PyTorchJob set it to rank 0's host");
  const std::string port_text = env.get("MASTER_PORT").value_or("");
  if (port_text.empty())
    refuse(because + " but MASTER_PORT is not: torchrun and PyTorchJob set it with MASTER_ADDR");

  out.kind = LaunchKind::kTorchrun;
  out.launcher = elastic ? "torchrun environment" : "RANK/WORLD_SIZE environment (PyTorchJob)";
  out.size = number("WORLD_SIZE", world, 1, INT_MAX);
  out.rank = number("RANK", rank, 0, INT_MAX);
  if (out.rank >= out.size) refuse("RANK=" + rank + " is not below WORLD_SIZE=" + world);
  const int master_port = number("MASTER_PORT", port_text, 1, 65535);
  // Optional (a PyTorchJob sets neither): -1, derived later from the ranks' hosts.
  out.local_size = -1;
  out.local_rank = -1;
  if (auto v = env.get("LOCAL_WORLD_SIZE"))
    out.local_size = number("LOCAL_WORLD_SIZE", *v, 1, out.size);
  if (auto v = env.get("LOCAL_RANK")) {
    out.local_rank = number("LOCAL_RANK", *v, 0, out.size - 1);
    if (out.local_size > 0 && out.local_rank >= out.local_size)
      refuse("LOCAL_RANK=" + *v +
             " is not below LOCAL_WORLD_SIZE=" + std::to_string(out.local_size));
  }

  const auto host_override = env.get("CCSCOPE_RENDEZVOUS_HOST");
  out.rendezvous_host = host_override ? *host_override : addr;
  // torchrun's agent on the first node hosts its own TCPStore at MASTER_ADDR:MASTER_PORT
  // when TORCHELASTIC_USE_AGENT_STORE is "True" (its workers then only connect:
  // torch/distributed/rendezvous.py, _create_c10d_store compares with str(True)), so the
  // port is taken; ccscope's rank 0 listens on the next one. Otherwise MASTER_PORT is free
  // for rank 0, as torch's own env:// rendezvous takes it.
  const bool agent_store = env.get("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";
  if (auto port = rendezvous_port_override(env)) {
    out.rendezvous_port = *port;
  } else if (agent_store) {
    if (master_port == 65535)
      refuse(
          "TORCHELASTIC_USE_AGENT_STORE=True: torchrun's store holds MASTER_PORT=65535 and "
          "no next port is left for ccscope's rendezvous: set CCSCOPE_RENDEZVOUS_PORT");
    out.rendezvous_port = master_port + 1;
  } else {
    out.rendezvous_port = master_port;
  }
}

}  // namespace

MpiFlavor mpi_flavor_from_version(const std::string& library_version) {
  const size_t start = library_version.find_first_not_of(" \t\r\n");
  if (start == std::string::npos) return MpiFlavor::kNone;
  const std::string_view text = std::string_view(library_version).substr(start);
  if (text.starts_with("MPICH Version:")) return MpiFlavor::kMpich;
  if (text.starts_with("Open MPI v")) return MpiFlavor::kOpenMpi;
  return MpiFlavor::kOther;
}

const char* mpi_flavor_name(MpiFlavor flavor) {
  switch (flavor) {
    case MpiFlavor::kNone:
      return "none";
    case MpiFlavor::kMpich:
      return "MPICH";
    case MpiFlavor::kOpenMpi:
      return "Open MPI";
    case MpiFlavor::kOther:
      return "other MPI";
  }
  return "?";
}

const char* launch_kind_name(LaunchKind kind) {
  switch (kind) {
    case LaunchKind::kSingle:
      return "single";
    case LaunchKind::kMpi:
      return "mpi";
    case LaunchKind::kSlurm:
      return "slurm";
    case LaunchKind::kTorchrun:
      return "torchrun";
  }
  return "?";
}

std::chrono::milliseconds finalize_bound_from(const char* text, std::chrono::milliseconds standard,
                                              std::string& problem) {
  problem.clear();
  if (text == nullptr || *text == '\0') return standard;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(seconds > 0) || seconds > 3600) {
    problem = std::string("CCSCOPE_FINALIZE_TIMEOUT_S='") + text +
              "' is not a number of seconds in (0, 3600]; MPI_Finalize keeps its " +
              std::to_string(std::chrono::duration_cast<std::chrono::seconds>(standard).count()) +
              " s bound";
    return standard;
  }
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

int slurm_rendezvous_port(const std::string& job_id, const std::string& step_id) {
  uint32_t hash = 2166136261u;  // FNV-1a, 32 bits
  for (const char c : job_id + "." + step_id) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 16777619u;
  }
  return 20000 + static_cast<int>(hash % 10000u);
}

std::vector<int> expand_slurm_tasks_per_node(const std::string& list) {
  std::vector<int> counts;
  auto bad = [&](const std::string& why) -> void {
    refuse("malformed tasks per node \"" + list + "\": " + why);
  };
  if (list.empty()) bad("empty");
  size_t pos = 0;
  while (true) {
    const size_t comma = list.find(',', pos);
    const std::string item = list.substr(pos, comma == std::string::npos ? comma : comma - pos);
    const size_t paren = item.find('(');
    const std::string count_text = item.substr(0, paren);
    const auto count = parse_integer(count_text);
    if (!count || count_text[0] == '-' || count_text[0] == '+' || *count > INT_MAX)
      bad("\"" + item + "\" is not a count");
    long long repeat = 1;
    if (paren != std::string::npos) {
      const std::string rest = item.substr(paren);  // "(x2)"
      if (rest.size() < 4 || rest[1] != 'x' || rest.back() != ')')
        bad("\"" + item + "\" is not N or N(xM)");
      const std::string repeat_text = rest.substr(2, rest.size() - 3);
      const auto r = parse_integer(repeat_text);
      if (!r || repeat_text[0] == '-' || repeat_text[0] == '+' || *r < 1 || *r > 1000000)
        bad("\"" + item + "\" is not N or N(xM)");
      repeat = *r;
    }
    if (counts.size() + repeat > 1000000) bad("more than 1000000 nodes");
    counts.insert(counts.end(), repeat, static_cast<int>(*count));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return counts;
}

namespace {

constexpr size_t kMaxHosts = 1000000;

struct Range {
  unsigned long long lo, hi;
  size_t width;
};

// "01-03,7" -> {{1,3,2},{7,7,1}}.
std::vector<Range> parse_ranges(const std::string& list, const std::string& text) {
  auto bad = [&](const std::string& why) -> void {
    refuse("malformed host list \"" + list + "\": " + why);
  };
  std::vector<Range> ranges;
  size_t pos = 0;
  while (true) {
    const size_t comma = text.find(',', pos);
    const std::string item = text.substr(pos, comma == std::string::npos ? comma : comma - pos);
    const size_t dash = item.find('-');
    const std::string lo_text = item.substr(0, dash);
    const std::string hi_text = dash == std::string::npos ? lo_text : item.substr(dash + 1);
    auto digits = [](const std::string& s) {
      return !s.empty() && s.size() <= 18 && s.find_first_not_of("0123456789") == std::string::npos;
    };
    if (!digits(lo_text) || !digits(hi_text))
      bad("\"[" + text + "]\" has a range that is not N or N-M");
    const Range r{std::stoull(lo_text), std::stoull(hi_text), lo_text.size()};
    if (r.lo > r.hi) bad("the range " + item + " goes downwards");
    if (r.hi - r.lo >= kMaxHosts) bad("more than " + std::to_string(kMaxHosts) + " hosts");
    ranges.push_back(r);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return ranges;
}

std::string padded(unsigned long long n, size_t width) {
  std::string digits = std::to_string(n);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

// One name with any number of bracket groups, expanded leftmost-outermost.
void expand_name(const std::string& list, const std::string& name, std::vector<std::string>& out) {
  auto bad = [&](const std::string& why) -> void {
    refuse("malformed host list \"" + list + "\": " + why);
  };
  // Split into literal text and bracket groups.
  std::vector<std::string> literals(1);
  std::vector<std::vector<Range>> groups;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == ']') bad("\"]\" without \"[\"");
    if (c != '[') {
      literals.back() += c;
      continue;
    }
    const size_t close = name.find(']', i + 1);
    if (close == std::string::npos) bad("\"[\" without \"]\"");
    const std::string inner = name.substr(i + 1, close - i - 1);
    if (inner.find('[') != std::string::npos) bad("nested \"[\"");
    if (inner.empty()) bad("empty \"[]\"");
    groups.push_back(parse_ranges(list, inner));
    literals.emplace_back();
    i = close;
  }
  size_t count = 1;
  for (const auto& group : groups) {
    size_t n = 0;
    for (const Range& r : group) n += r.hi - r.lo + 1;
    if (n > kMaxHosts || count * n > kMaxHosts)
      bad("more than " + std::to_string(kMaxHosts) + " hosts");
    count *= n;
  }
  if (out.size() + count > kMaxHosts) bad("more than " + std::to_string(kMaxHosts) + " hosts");
  // Odometer over the groups, the last one fastest.
  auto recurse = [&](auto&& self, size_t g, const std::string& so_far) -> void {
    if (g == groups.size()) {
      out.push_back(so_far);
      return;
    }
    for (const Range& r : groups[g])
      for (unsigned long long n = r.lo; n <= r.hi; ++n)
        self(self, g + 1, so_far + padded(n, r.width) + literals[g + 1]);
  };
  recurse(recurse, 0, literals[0]);
}

}  // namespace

std::vector<std::string> expand_slurm_hostlist(const std::string& list) {
  auto bad = [&](const std::string& why) -> void {
    refuse("malformed host list \"" + list + "\": " + why);
  };
  if (list.empty()) bad("empty");
  if (list.find_first_of(" \t\r\n") != std::string::npos) bad("whitespace");
  std::vector<std::string> hosts;
  // Names are separated by commas outside brackets.
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    if (i < list.size()) {
      if (list[i] == '[') ++depth;
      if (list[i] == ']') --depth;
      if (depth < 0) bad("\"]\" without \"[\"");
      if (list[i] != ',' || depth > 0) continue;
    }
    const std::string name = list.substr(start, i - start);
    if (name.empty()) bad("an empty name");
    expand_name(list, name, hosts);
    start = i + 1;
  }
  return hosts;
}

Launch decide_launch(const Getenv& getenv, MpiFlavor mpi) {
  const Env env(getenv);
  Launch out;
  fill_slurm_fields(env, out);
  out.rendezvous_timeout = rendezvous_timeout(env);
  rendezvous_port_override(env);  // refused whatever the kind when malformed

  // torchrun's workers: torchrun spawned this process (it sets TORCHELASTIC_* on its
  // workers only), so MPI or Slurm variables here belong to whoever started torchrun (srun
  // with MpiDefault=pmi2, an mpiexec per node) and describe the agents, not the workers.
  if (env.has("TORCHELASTIC_RUN_ID")) {
    as_torchrun(env, out);
    return out;
  }

  if (const auto m = read_mpi_launcher(env, mpi, out.slurm_job_id, out.slurm_step_id)) {
    if (speaks(mpi, m->wire)) {
      out.kind = LaunchKind::kMpi;
      out.launcher = m->launcher;
      out.rank = m->rank;
      out.size = m->size;
      out.local_rank = m->local_rank;
      out.local_size = m->local_size;
      return out;
    }
    const std::string started = m->launcher + " started this process (" + m->marker + " is set)";
    if (!m->srun_plugin) {
      if (mpi == MpiFlavor::kNone)
        refuse(started + " but this ccscope is built without MPI: start it with srun or torchrun");
      refuse(started + " and speaks " + wire_name(m->wire) + ", which this ccscope's MPI (" +
             mpi_flavor_name(mpi) + ") does not: " + flavor_suggestion(mpi));
    }
    // srun's own plugin for this very step (PMI_JOBID or PMIX_NAMESPACE names it): the
    // step's variables describe these tasks, so the step runs without MPI.
    const std::optional<SlurmStep> step = read_slurm_step(env);
    if (!step) refuse(started + " but SLURM_STEP_ID is not a job step");  // unreachable
    out.launcher = m->launcher + " (Slurm environment)";
    out.note = mpi == MpiFlavor::kNone
                   ? m->launcher +
                         ": this ccscope is built without MPI; running over Slurm's "
                         "environment with gloo/nccl"
                   : m->launcher + ": " + mpi_flavor_name(mpi) + " here speaks no " +
                         wire_name(m->wire) +
                         ", so the mpi backend is not available; running over Slurm's "
                         "environment with gloo/nccl (" +
                         flavor_suggestion(mpi) + " for MPI)";
    as_slurm(env, *step, out);
    return out;
  }

  if (env.has("RANK") || env.has("WORLD_SIZE")) {
    as_torchrun(env, out);
    return out;
  }

  if (const std::optional<SlurmStep> step = read_slurm_step(env)) {
    as_slurm(env, *step, out);
    return out;
  }

  out.kind = LaunchKind::kSingle;
  out.launcher = "single process";
  return out;
}

}  // namespace ccscope::job
