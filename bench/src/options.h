#pragma once
// Forwarding header: BenchOptions is public (ccscope/bench/options.h); the
// flag parser lives in the command layer (app/src/bench_flags.cpp).
#include "ccscope/bench/options.h"
