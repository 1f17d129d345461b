# wpgen: build, test, demo. `make demo` and `make test` set up everything on a fresh machine.
# Outputs go to build/. scripts/deps.sh probes (and installs) the dependencies once.

BUILD    := build
CC       := gcc
MPICC    := mpicc
WARN     := -Wall -Wextra -Wno-unused-parameter
CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 $(WARN) -D_GNU_SOURCE -MMD -MP
OPENMP   := -fopenmp
LUA_INC  := -I/usr/include/lua5.4

.DEFAULT_GOAL := all
# keep objects make considers intermediate (test objects): no rebuild on the next make test
.SECONDARY:
.PHONY: all deps test test-quick test-blas test-slurm demo bench-gen bench-cpu bench-sim bench-scale bench-save bench-memory clean

# The probe runs once; delete build/config.mk to run it again. It sets BLAS_CFLAGS and BLAS_LIBS.
$(BUILD)/config.mk: scripts/deps.sh
	@echo "deps: probing dependencies"
	@bash scripts/deps.sh $@
-include $(BUILD)/config.mk
deps: $(BUILD)/config.mk

# generator/<stage>/*.c, bottom first: util, input, ir, verify, place, cost, lua, plan, sim, search,
# emit, calibrate, export, cli (docs/architecture.md; scripts/check_layers.py checks the includes,
# the runtime headers a generator file may take among them: -Iruntime is for those)
GEN_SRC    := $(wildcard generator/*/*.c)
GEN_LIBSRC := $(filter-out generator/cli/main.c,$(GEN_SRC))
# What the generator shares with the runtime: the model's shape and presets.
SHARED_SRC := runtime/common/config.c runtime/common/modelcfg.c runtime/common/outpaths.c
UNIT_SRC   := $(wildcard tests/unit/test_*.c)
MPI_TEST_SRC := $(wildcard tests/mpi/*.c)
TOOL_SRC   := $(wildcard tests/tools/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

WPGEN      := $(BUILD)/wpgen
LIBWPGEN   := $(BUILD)/libwpgen.a
WPREF      := $(BUILD)/wp-ref
UNIT_BINS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
MPI_BINS   := $(patsubst tests/mpi/%.c,$(BUILD)/tests-mpi/%,$(MPI_TEST_SRC))
TOOL_BINS  := $(patsubst tests/tools/%.c,$(BUILD)/tools/%,$(TOOL_SRC))

GEN_LIBS := -ljansson -llua5.4 -lm -pthread
RT_LIBS  := $(BLAS_LIBS) $(OPENMP) -ljansson -lm -pthread

# The runtime, one library per folder: build/libwprt-FOLDER.a from runtime/FOLDER/*.c, compiled
# by the compiler and with the flags its line names. common and train are backend-neutral (the
# training program, the loop, checkpoints), cpu is the CPU compute backend, mpi the MPI
# communication backend (the only folder that includes mpi.h). A new backend's folder is one more
# line here (emitted programs take it from generator/emit/backends.c). build/libwprt.a holds them
# all, for the programs here and the scripts (bench-cpu, the torch test): a static library gives
# a program only the objects it uses, so wp-ref links no MPI.
RT_ARCHIVES :=
RT_OBJ :=
define runtime_lib
RT_ARCHIVES += $(BUILD)/libwprt-$(1).a
RT_OBJ += $$(call obj,$$(wildcard runtime/$(1)/*.c))
$(BUILD)/obj/runtime/$(1)/%.o: runtime/$(1)/%.c | $(BUILD)/config.mk
	@mkdir -p $$(@D)
	$(2) $$(CFLAGS) $(OPENMP) $(3) -Iruntime -c $$< -o $$@
$(BUILD)/libwprt-$(1).a: $$(call obj,$$(wildcard runtime/$(1)/*.c))
	@mkdir -p $$(@D)
	rm -f $$@ && ar rcs $$@ $$^
endef
$(eval $(call runtime_lib,common,$(CC)))
$(eval $(call runtime_lib,train,$(CC)))
$(eval $(call runtime_lib,cpu,$(CC),$$(BLAS_CFLAGS)))
$(eval $(call runtime_lib,hostmpi,$(MPICC)))
$(eval $(call runtime_lib,mpi,$(MPICC)))
# ar keeps one member per file name: the runtime's file names must differ across its folders
ifneq ($(words $(notdir $(RT_OBJ))),$(words $(sort $(notdir $(RT_OBJ)))))
$(error two runtime folders have a source file of the same name: $(sort $(notdir $(RT_OBJ))))
endif
LIBWPRT := $(BUILD)/libwprt.a
$(LIBWPRT): $(RT_ARCHIVES)
	rm -f $@ && ar rcs $@ $(RT_OBJ)

all: $(BUILD)/config.mk $(WPGEN) $(LIBWPRT) $(WPREF) cuda

# The CUDA compute backend (runtime/cuda) and the NCCL communication backend (runtime/nccl), built
# when nvcc (PATH, else CUDA_HOME/bin) and nccl.h (CUDA's include folder, else /usr/include) are
# found: build/libwprt-cuda.a, build/libwprt-nccl.a, and the GPU test programs whose sources exist
# (tests/gpu). Outside libwprt.a: programs that want them name them. Their host-only parts
# (cuda_mem.c, nccl_book.c) build everywhere, for the unit tests. `make CUDA=no` skips them.
CUDA_HOME ?= /usr/local/cuda
NVCC      := $(or $(shell command -v nvcc 2>/dev/null),$(wildcard $(CUDA_HOME)/bin/nvcc))
CUDA_DIR  := $(if $(NVCC),$(patsubst %/bin/nvcc,%,$(realpath $(NVCC))))
NCCL_H    := $(firstword $(wildcard $(CUDA_DIR)/include/nccl.h /usr/include/nccl.h))
CUDA_ARCH := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
comma     := ,
CUDA_SMS  := $(patsubst code=%,%,$(filter code=%,$(subst $(comma), ,$(CUDA_ARCH))))
NVCCFLAGS := -O3 -std=c++17 $(CUDA_ARCH) -Xcompiler -Wall
CUDA_INC  := -I$(CUDA_DIR)/include $(if $(NCCL_H),-I$(dir $(NCCL_H)))
CUDA_LIBS := -L$(CUDA_DIR)/lib64 -lcublasLt -lcudart -lstdc++ -lpthread -ldl
LIBCUDA   := $(BUILD)/libwprt-cuda.a
LIBNCCL   := $(BUILD)/libwprt-nccl.a
CUDA_OBJ  := $(call obj,$(wildcard runtime/cuda/*.c)) $(patsubst %.cu,$(BUILD)/obj/%.o,$(wildcard runtime/cuda/*.cu))
NCCL_OBJ  := $(call obj,$(wildcard runtime/nccl/*.c))
GPU_TESTS := $(patsubst tests/gpu/%.cu,$(BUILD)/gpu/%,$(wildcard tests/gpu/test_kernels.cu tests/gpu/bench_step.cu tests/gpu/bench_attention.cu))
ifeq ($(CUDA),no)
CUDA_WHY  := CUDA=no
else ifeq ($(NVCC),)
CUDA_WHY  := nvcc is neither in PATH nor in $(CUDA_HOME)/bin
else ifeq ($(NCCL_H),)
CUDA_WHY  := nccl.h is neither in $(CUDA_DIR)/include nor in /usr/include
endif

$(BUILD)/obj/runtime/cuda/%.o: runtime/cuda/%.cu | $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -Iruntime -c $< -o $@
# cuDNN's fused attention, when scripts/deps.sh found the cudnn-frontend headers and cudnn.h
# (build/config.mk: CUDNN_FE_INC, CUDNN_INC, CUDNN_LIBDIR); else the same file builds without it
# and the backend says so at start-up. libcudnn.so.9 is loaded at run time, never linked.
CUDNN_FLAGS := $(if $(and $(CUDNN_FE_INC),$(CUDNN_INC)),-DWP_HAVE_CUDNN -DNV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING \
               -DCUDNN_FRONTEND_SKIP_JSON_LIB -I$(CUDNN_FE_INC) -I$(CUDNN_INC) \
               $(if $(CUDNN_LIBDIR),-DWP_CUDNN_LIBDIR='"$(CUDNN_LIBDIR)"'))
$(BUILD)/obj/runtime/cuda/attention_cudnn.o: runtime/cuda/attention_cudnn.cu | $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) $(CUDNN_FLAGS) -Iruntime -c $< -o $@
$(BUILD)/obj/runtime/cuda/%.o: runtime/cuda/%.c | $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(CUDA_INC) -Iruntime -c $< -o $@
$(BUILD)/obj/runtime/nccl/%.o: runtime/nccl/%.c | $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS) $(CUDA_INC) -Iruntime -c $< -o $@
# the bookkeeping is plain C (no MPI, CUDA or NCCL): the unit test's, sanitizers included
$(BUILD)/obj/runtime/nccl/nccl_book.o: runtime/nccl/nccl_book.c | $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Iruntime -c $< -o $@
$(LIBCUDA): $(CUDA_OBJ)
	rm -f $@ && ar rcs $@ $^
$(LIBNCCL): $(NCCL_OBJ)
	rm -f $@ && ar rcs $@ $^
# test_kernels checks the kernels against the CPU model; bench_step times a step on one GPU
$(BUILD)/gpu/test_kernels: tests/gpu/test_kernels.cu $(LIBCUDA) $(BUILD)/libwprt-cpu.a $(BUILD)/libwprt-common.a
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -Xcompiler -fopenmp -Iruntime -Itests $< -o $@ $(LIBCUDA) $(BUILD)/libwprt-cpu.a \
		$(BUILD)/libwprt-common.a $(CUDA_LIBS) $(BLAS_LIBS) -lgomp -lm
$(BUILD)/gpu/bench_step: tests/gpu/bench_step.cu $(LIBCUDA) $(BUILD)/libwprt-common.a
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -Iruntime -Itests $< -o $@ $(LIBCUDA) $(BUILD)/libwprt-common.a $(CUDA_LIBS) -lm
# bench_attention times the attention kernels alone
$(BUILD)/gpu/bench_attention: tests/gpu/bench_attention.cu $(LIBCUDA) $(BUILD)/libwprt-common.a
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -Iruntime -Itests $< -o $@ $(LIBCUDA) $(BUILD)/libwprt-common.a $(CUDA_LIBS) -lm

ifeq ($(CUDA_WHY),)
cuda: $(LIBCUDA) $(LIBNCCL) $(GPU_TESTS)
	@echo "cuda: built $(LIBCUDA) and $(LIBNCCL) for $(CUDA_SMS) ($(NVCC), $(NCCL_H))$(if $(GPU_TESTS), and $(GPU_TESTS))"
else
cuda:
	@echo "cuda: the CUDA and NCCL backends are not built: $(CUDA_WHY) (CUDA_HOME=... names the toolkit)"
endif
.PHONY: cuda

# The tensor-core attention kernels' source run on the CPU by an emulator of the PTX they use
# (tests/gpu/emulate_attention_tc.cpp): the one check of their indices, fragment layouts and
# barriers that needs no GPU, so it is a unit test everywhere (plain g++, no CUDA).
CXX ?= g++
EMU_TC := $(BUILD)/tests/test_attention_tc_emulated
$(EMU_TC): tests/gpu/emulate_attention_tc.cpp runtime/cuda/attention_tc_cuda.cu $(BUILD)/libwprt-cpu.a $(BUILD)/libwprt-common.a
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -O1 -pthread -fno-strict-aliasing -Wno-unknown-pragmas -Iruntime $< -o $@ \
		$(BUILD)/libwprt-cpu.a $(BUILD)/libwprt-common.a $(BLAS_LIBS) -fopenmp -lm
# ring attention's CUDA block kernels the same way (tests/gpu/emulate_attention_block.cpp)
EMU_BLOCK := $(BUILD)/tests/test_attention_block_emulated
$(EMU_BLOCK): tests/gpu/emulate_attention_block.cpp runtime/cuda/attention_block_cuda.cu $(BUILD)/libwprt-cpu.a $(BUILD)/libwprt-common.a
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -O1 -Wno-unknown-pragmas -Iruntime $< -o $@ \
		$(BUILD)/libwprt-cpu.a $(BUILD)/libwprt-common.a $(BLAS_LIBS) -fopenmp -lm

# -Werror=switch: the generator's switches over operation kinds have no default, so a kind added to
# the op table stops the build at each place it must be written (docs/extending.md, "An operation")
$(BUILD)/obj/generator/%.o: generator/%.c | $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Werror=switch $(LUA_INC) -Igenerator -Iruntime -c $< -o $@

$(BUILD)/obj/tests/%.o: tests/%.c | $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(OPENMP) $(LUA_INC) -Igenerator -Iruntime -Itests -c $< -o $@

$(LIBWPGEN): $(call obj,$(GEN_LIBSRC) $(SHARED_SRC))
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

# export (generator/export) reads checkpoints through the runtime's own code (runtime/train)
$(WPGEN): $(BUILD)/obj/generator/cli/main.o $(LIBWPGEN) $(BUILD)/libwprt-train.a $(BUILD)/libwprt-common.a
	$(CC) $^ -o $@ $(GEN_LIBS) $(OPENMP)

# The reference trainer: runtime/ref on the neutral runtime and the CPU backend, no MPI; it knows
# the same model presets as wpgen (runtime/common/modelcfg.c).
$(BUILD)/obj/runtime/ref/%.o: runtime/ref/%.c | $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(OPENMP) -Iruntime -c $< -o $@
$(WPREF): $(call obj,$(wildcard runtime/ref/*.c)) $(LIBWPRT)
	$(CC) $^ -o $@ $(RT_LIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(LIBWPGEN) $(LIBWPRT)
	@mkdir -p $(@D)
	$(CC) $^ -o $@ $(GEN_LIBS) $(RT_LIBS)

# MPI test programs: run by the scripts in tests/mpi/ under mpirun.
$(BUILD)/tests-mpi/%: tests/mpi/%.c $(LIBWPRT) | $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS) $(OPENMP) -Iruntime -Itests $< -o $@ $(LIBWPRT) $(RT_LIBS)

# Helpers of the test scripts (checkpoint comparison, ...).
$(BUILD)/tools/%: $(BUILD)/obj/tests/tools/%.o $(LIBWPRT)
	@mkdir -p $(@D)
	$(CC) $^ -o $@ $(RT_LIBS)

# the host-side parts of the GPU backends, tested without a GPU
$(BUILD)/tests/test_nccl_book: $(BUILD)/obj/runtime/nccl/nccl_book.o
$(BUILD)/tests/test_cuda_mem: $(BUILD)/obj/runtime/cuda/cuda_mem.o

# scripts/test_deps.sh installs what the tests need beyond the build (PyTorch, transformers,
# tokenizers) before any test runs
test: all $(UNIT_BINS) $(MPI_BINS) $(TOOL_BINS) $(EMU_TC) $(EMU_BLOCK)
	@bash scripts/test_deps.sh $(BUILD)
	@bash tests/run.sh $(BUILD)

# The fast part of the suite, for a check before a commit (a few minutes): the unit tests but the
# PTX emulator's, and the CLI tests but the three slowest (tests/README.md)
QUICK_SKIP := unit/test_attention_tc_emulated cli/test_sandbox cli/test_emit_owned cli/test_interrupt
test-quick: all $(UNIT_BINS) $(TOOL_BINS)
	@TESTS="unit/ cli/" SKIP="$(QUICK_SKIP)" bash tests/run.sh $(BUILD)

# The suite under every OpenBLAS core type this CPU runs, and the spread of each tolerance-bound
# figure across them (scripts/test_blas.sh; not in `make test`: one suite per core type)
test-blas: all $(UNIT_BINS) $(MPI_BINS) $(TOOL_BINS) $(EMU_TC) $(EMU_BLOCK)
	@bash scripts/test_deps.sh $(BUILD)
	@bash scripts/test_blas.sh $(BUILD)

demo: all
	@bash scripts/demo.sh $(BUILD)

# The emitted job.sbatch under a real Slurm set up on this machine (root; about six and a half minutes):
# time limit, save, requeue; then a node lost and the survivors re-planned; then WPGEN_PROBE=1
test-slurm: all $(TOOL_BINS)
	@bash tests/slurm/slurm_job.sh $(BUILD) && bash tests/slurm/slurm_replan.sh $(BUILD) && bash tests/slurm/slurm_probe.sh $(BUILD)

bench-gen: all
	@bash scripts/bench_gen.sh $(BUILD)

bench-cpu: all
	@bash scripts/bench_cpu.sh $(BUILD)

bench-sim: all
	@bash scripts/bench_sim.sh $(BUILD)

bench-scale: all
	@bash scripts/bench_scale.sh $(BUILD)

bench-save: all
	@bash scripts/bench_save.sh $(BUILD)

# planned against measured peak memory of emitted CPU programs over sequence lengths (not in make test)
bench-memory: all
	@bash scripts/bench_memory.sh $(BUILD)

clean:
	rm -rf $(BUILD)

# libFuzzer harnesses: `make fuzz` (clang; FUZZ_SECONDS per target). See tests/fuzz/fuzz.mk.
include tests/fuzz/fuzz.mk

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
