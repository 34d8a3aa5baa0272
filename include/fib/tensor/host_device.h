// FIB_HD marks inline functions that CUDA device code calls as well as the host (the numeric
// conversions, the counter-based generator); plain inline functions in host-only builds.
#pragma once

#if defined(__CUDACC__)
#define FIB_HD __host__ __device__
#else
#define FIB_HD
#endif
