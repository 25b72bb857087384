# plumb build. `make` builds build/plumb, the test binary and its fakes;
# `make test` runs the whole suite; `make asan` runs it under
# AddressSanitizer+UBSan; `make accept` builds build/plumb alone and runs
# `plumb accept --quick` on this host; `make cuda` / `make hip` build the GPU
# plugins. Every target first makes sure the Debian packages it needs are
# installed (scripts/deps.sh: the build set for accept, the test set for the
# rest, the gpu set for hip), so a fresh Debian 12 machine needs nothing by
# hand. The package step runs before anything is compiled (an order-only
# prerequisite), and the flags that come from installed tools (mpicc) are read
# when the first recipe needs them, i.e. after it: on a machine without Open
# MPI, `make accept` installs it and builds in one go.

BUILD   ?= build
CC      ?= cc
ifeq ($(origin CC),default)
CC      := gcc
endif
OPT     ?= -O2
SAN     ?=
# Read once, on first use (not at parse time, before deps.sh has run).
MPI_CFLAGS = $(eval MPI_CFLAGS := $$(shell mpicc --showme:compile 2>/dev/null))$(MPI_CFLAGS)
MPI_LIBS   = $(eval MPI_LIBS := $$(shell mpicc --showme:link 2>/dev/null))$(MPI_LIBS)
# -ffp-contract=off: golden arithmetic must not be fused behind our back
# (docs/numerics.md); fast kernels that want fma call fmaf explicitly.
CFLAGS  ?= $(OPT) -g
CFLAGS  += -std=c11 -Wall -Wextra -Werror -Wno-format-truncation -D_GNU_SOURCE -ffp-contract=off -fno-fast-math \
           -fopenmp -pthread -Isrc -MMD -MP $(MPI_CFLAGS) $(SAN)
LDLIBS   = $(MPI_LIBS) -lgsl -lopenblas -ljansson -lmicrohttpd -lhwloc -lcrypto -lz -lm -ldl -lpthread
LDFLAGS += -fopenmp -pthread -rdynamic $(SAN)

LIB_DIRS := core dev comm models train faults health report accept
LIB_SRC  := $(foreach d,$(LIB_DIRS),$(wildcard src/$(d)/*.c)) $(wildcard src/models/*/*.c)
CLI_SRC  := $(wildcard src/cli/*.c)
# tests/fake_*.c are not part of the test binary: each becomes a small shared
# library (build/tests/libfake_*.so) that stands in for a vendor library.
TEST_SRC := $(filter-out tests/fake_%.c,$(wildcard tests/*.c))
FAKE_LIBS := $(patsubst tests/fake_%.c,$(BUILD)/tests/libfake_%.so,$(wildcard tests/fake_*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o)

.PHONY: all bench deps test asan coverage mutants accept cuda hip gpu-compile kprof clean fuzz fuzz-build
all: $(BUILD)/plumb $(BUILD)/plumb-tests $(FAKE_LIBS) bench

# Which package set this make needs: `make accept` alone needs only the build
# set (no browser, prometheus or node); any other goal the test set.
DEPS_SET := $(if $(filter-out accept $(BUILD)/plumb,$(or $(MAKECMDGOALS),all)),test,build)
deps:
	@scripts/deps.sh $(DEPS_SET)

$(BUILD)/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libplumb.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/plumb: $(CLI_OBJ) $(BUILD)/libplumb.a
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libplumb.a $(LDLIBS)

# -MMD: a fake that copies a struct from our headers (fake_gpu.c copies the
# dev_ops and train_ops tables) is rebuilt when the header changes (and when
# this Makefile does: older builds have no .d file for it yet).
$(BUILD)/tests/libfake_%.so: tests/fake_%.c Makefile | deps
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O1 -g -Wall -Wextra -Werror -D_GNU_SOURCE -fPIC -shared -Isrc -MMD -MP -MF $(@:.so=.d) -o $@ $< -lm

# The test binary links the library and the CLI (minus main) so tests can
# call commands directly.
$(BUILD)/plumb-tests: $(TEST_OBJ) $(filter-out $(BUILD)/src/cli/main.o,$(CLI_OBJ)) $(BUILD)/libplumb.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Benchmarks (bench/*.c): small programs over the library; bench/ scripts run them.
BENCH_SRC := $(wildcard bench/*.c)
bench: $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
$(BUILD)/bench/%: bench/%.c $(BUILD)/libplumb.a $(BUILD)/src/cli/args.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/src/cli/args.o $(BUILD)/libplumb.a $(LDLIBS)

test: all
	@tests/run.sh $(BUILD)

# fast_unwind_on_malloc=0: full leak stacks, so tests/lsan.supp can name the library that keeps
# an allocation (Open MPI plugins have no frame pointers and are dlclose'd at MPI_Finalize).
asan:
	$(MAKE) BUILD=build-asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" all
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:fast_unwind_on_malloc=0 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	  UBSAN_OPTIONS=print_stacktrace=1 PLUMB_ASAN=1 tests/run.sh build-asan

# Line and branch coverage per src/ folder (gcov + lcov): an instrumented
# tree in build-cov, the suite run on it, the figures printed (tests/coverage.sh).
coverage:
	$(MAKE) BUILD=build-cov OPT=-O1 SAN="--coverage" all
	tests/coverage.sh build-cov

# Mutation checks (tests/mutants.txt): each mutant applied in a scratch copy
# (build-mut/), built, and its test must fail. MUTANTS_SAMPLE=5: CI's sample.
mutants: all
	tests/mutants.py

accept: $(BUILD)/plumb
	$(BUILD)/plumb accept --quick

# ---- GPU plugins: one source set (src/gpu), two vendors ----
NVCC     ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
HIPCC    ?= hipcc
GPU_SRC  := $(wildcard src/gpu/*.cu)
GPU_HDR  := $(wildcard src/gpu/*.h src/gpu/*.cuh src/core/*.h src/dev/*.h)
# sm_90 machine code plus compute_90 PTX; --fmad=false keeps golden kernels
# bit-identical to the CPU (fast kernels use explicit fmaf / library calls).
NVCC_FLAGS ?= -O3 -std=c++17 -gencode arch=compute_90,code=[sm_90,compute_90] --fmad=false \
              -Xcompiler -fPIC,-Wall,-Wno-unused-function -Isrc -DPLUMB_CUDA
# NVCC_EXTRA: flags added to NVCC_FLAGS (scripts/gpu-prep.sh's PREP_SWCVT build)
NVCC_EXTRA ?=
HIP_FLAGS  ?= -O3 -std=c++17 --offload-arch=gfx90a -ffp-contract=off -fPIC -Wall -Wno-unused-function -Isrc -DPLUMB_HIP

cuda: $(BUILD)/libplumb-cuda.so
hip: $(BUILD)/libplumb-hip.so
gpu-compile: cuda hip
# hipcc and the HIP/ROCm SMI headers come from Debian (the gpu set); nvcc is
# the CUDA toolkit's (not a Debian package: where it is absent, `make cuda`
# says so and stops).
.PHONY: deps-gpu nvcc-present
deps-gpu:
	@scripts/deps.sh gpu
nvcc-present:
	@command -v $(NVCC) >/dev/null 2>&1 || { echo "make cuda: no nvcc at $(NVCC) (install the CUDA toolkit, or NVCC=/path/to/nvcc)" >&2; exit 2; }

$(BUILD)/cuda/%.o: src/gpu/%.cu $(GPU_HDR) | nvcc-present
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) $(NVCC_EXTRA) -c $< -o $@

$(BUILD)/libplumb-cuda.so: $(GPU_SRC:src/gpu/%.cu=$(BUILD)/cuda/%.o)
	$(NVCC) -shared -o $@ $^ -L$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lcudart -ldl

# kernel-time profiler for the GPU host (bench/kprof.cc; CUDA_INJECTION64_PATH)
kprof: $(BUILD)/libplumb-kprof.so
$(BUILD)/libplumb-kprof.so: bench/kprof.cc
	@mkdir -p $(dir $@)
	g++ -O2 -std=c++17 -shared -fPIC -Wall -Werror -I$(CUDA_HOME)/include -o $@ $< -L$(CUDA_HOME)/lib -L$(CUDA_HOME)/lib64 -lcupti

$(BUILD)/hip/%.o: src/gpu/%.cu $(GPU_HDR) | deps-gpu
	@mkdir -p $(dir $@)
	$(HIPCC) $(HIP_FLAGS) -x hip -c $< -o $@

$(BUILD)/libplumb-hip.so: $(GPU_SRC:src/gpu/%.cu=$(BUILD)/hip/%.o)
	$(HIPCC) -shared --offload-arch=gfx90a -o $@ $^ -ldl

# ---- fuzzing (docs/HACKING.md, "Fuzzing") ----
# libFuzzer targets (tests/fuzz/fuzz_*.c), built with clang over the library
# compiled with coverage instrumentation, AddressSanitizer and UBSan (any
# UB aborts). `make fuzz FUZZ_SECONDS=N` builds them and runs each N
# seconds from its committed seed corpus (tests/fuzz/corpus/<target>/),
# printing exec/s, corpus size and crash / no crash per target; a crash
# fails it. FUZZ_TARGETS="criteo_line args" runs some only. -Wno-pass-failed:
# the instrumentation keeps clang from vectorizing `omp simd` loops, which it
# reports as a warning; nothing is wrong with the code.
FUZZ_BUILD   ?= build-fuzz
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 10
FUZZ_TARGETS ?=
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS   = -O1 -g -std=c11 -Wall -Wextra -Werror -Wno-pass-failed -D_GNU_SOURCE -ffp-contract=off -fno-fast-math \
                -fopenmp -pthread -Isrc -MMD -MP $(MPI_CFLAGS) $(FUZZ_SAN)
FUZZ_SRC     := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS    := $(FUZZ_SRC:tests/fuzz/%.c=$(FUZZ_BUILD)/%)
FUZZ_OBJ     := $(LIB_SRC:%.c=$(FUZZ_BUILD)/%.o) $(FUZZ_BUILD)/src/cli/args.o

fuzz-build: $(FUZZ_BINS)
fuzz: fuzz-build
	@scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

$(FUZZ_BUILD)/src/%.o: src/%.c | deps
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_BUILD)/libplumb.a: $(FUZZ_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_util.h $(FUZZ_BUILD)/libplumb.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -MF $@.d -o $@ $< $(FUZZ_BUILD)/libplumb.a $(LDLIBS)

clean:
	rm -rf build build-asan build-cov build-mut build-fuzz

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
-include $(shell find $(FUZZ_BUILD) -name '*.d' 2>/dev/null)
