/* tests/fake_nccl.c as an NCCL older than 2.14: no ncclCommInitRankConfig. */
#define FAKE_NCCL_OLD
#include "fake_nccl.c"
