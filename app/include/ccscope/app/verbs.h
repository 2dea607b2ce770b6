#pragma once
// The verbs of `ccscope <verb>`, one file each in app/src/<verb>_verb.cpp:
// flags, usage, printing and the exit code; the work is the libraries'.
// `args` are the words after the verb, `command_line` the whole command.
#include <string>
#include <vector>

namespace ccscope::app {

// 0 ok, 1 wrong results or a failure while measuring, 2 bad arguments or a run
// this job cannot do, 3 timeout, 128 + signal when stopped.
int bench_verb(const std::vector<std::string>& args, const std::vector<std::string>& command_line);
// 0 ok, 1 an output that could not be written, 2 bad arguments or input (one
// line on stderr).
int report_verb(const std::vector<std::string>& args, const std::vector<std::string>& command_line);
// 0 no regression, 1 regression, 125 cannot judge (also: an input it cannot
// read, an empty current run, no common time statistic), 2 bad flags.
int compare_verb(const std::vector<std::string>& args,
                 const std::vector<std::string>& command_line);
// 0 ok, 2 bad arguments or input.
int baseline_verb(const std::vector<std::string>& args,
                  const std::vector<std::string>& command_line);

// 0 ok, 1 a failure while measuring or writing, 2 bad arguments or input.
int topo_verb(const std::vector<std::string>& args, const std::vector<std::string>& command_line);

// 0 ok, 1 a check failed (loss not equivalent to one rank's, bytes or memory
// off their formulas) or a failure while training, 2 bad arguments or input,
// 3 timeout; an output that could not be written is 1, as in every verb.
int train_verb(const std::vector<std::string>& args, const std::vector<std::string>& command_line);

// 0 a recommendation, 1 no layout fits, 2 bad arguments or input.
int advise_verb(const std::vector<std::string>& args,
                const std::vector<std::string>& command_line);

// The bring-up checklist: 0 every check passed (WARN allowed), 1 a check
// FAILed, 2 bad arguments or input, 3 a hang was cut short. `diag nccl-log`
// goes to nccl_log_verb.
int diag_verb(const std::vector<std::string>& args, const std::vector<std::string>& command_line);
// ccscope diag nccl-log FILE...: what NCCL's debug output says (versions,
// transports per rank pair, findings). 0 no finding above info, 1 a warn or
// fail finding or --json-file not written, 2 bad arguments or no file readable.
int nccl_log_verb(const std::vector<std::string>& args,
                  const std::vector<std::string>& command_line);

}  // namespace ccscope::app
