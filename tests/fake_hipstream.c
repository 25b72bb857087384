/* A stand-in for the HIP runtime's hipStreamQuery, the one symbol
 * src/comm/comm_nccl.c takes from libamdhip64 to poll a collective while it
 * watches the communicator's errors: tests/t_nccl_fake.sh links it as
 * libamdhip64.so.6 in a folder on LD_LIBRARY_PATH. The fake NCCL's
 * collectives are synchronous, so the stream is idle (0 = hipSuccess) unless
 * FAKE_HIP_STREAM_BUSY is set: then it never completes (600 =
 * hipErrorNotReady), a collective that hangs. */
#include <stdlib.h>

int hipStreamQuery(void *stream)
{
    (void)stream;
    const char *b = getenv("FAKE_HIP_STREAM_BUSY");
    return b && *b && *b != '0' ? 600 : 0;
}
