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
BLAS_INC := -I/usr/include/x86_64-linux-gnu/openblas-pthread
BLAS_LIB := -lopenblas

.DEFAULT_GOAL := all
# keep objects make considers intermediate (test objects): no rebuild on the next make test
.SECONDARY:
.PHONY: all deps test demo bench-gen bench-cpu bench-sim clean

# The probe runs once; delete build/config.mk to run it again.
$(BUILD)/config.mk: scripts/deps.sh
	@echo "deps: probing dependencies"
	@./scripts/deps.sh $@
-include $(BUILD)/config.mk
deps: $(BUILD)/config.mk

# generator/<stage>/*.c: cli, input, lua, place, ir, verify, sim, emit (docs/architecture.md)
GEN_SRC    := $(wildcard generator/*/*.c)
GEN_LIBSRC := $(filter-out generator/cli/main.c,$(GEN_SRC))
# What the generator shares with the runtime: the model's shape and presets.
SHARED_SRC := runtime/common/config.c runtime/common/modelcfg.c
# The training program of emitted plans and its MPI layer (compiled with mpicc); the rest of the
# runtime (model math, AdamW, data, checkpoints) is libwprt, which the reference trainer links.
RT_MPI_SRC := $(wildcard runtime/mpi/*.c) runtime/train/train.c runtime/train/trace.c runtime/cpu/step_ops.c
RT_SRC     := $(filter-out $(RT_MPI_SRC),$(wildcard runtime/common/*.c runtime/cpu/*.c runtime/train/*.c))
UNIT_SRC   := $(wildcard tests/unit/test_*.c)
MPI_TEST_SRC := $(wildcard tests/mpi/*.c)
TOOL_SRC   := $(wildcard tests/tools/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

WPGEN      := $(BUILD)/wpgen
LIBWPGEN   := $(BUILD)/libwpgen.a
LIBWPRT    := $(BUILD)/libwprt.a
LIBWPMPI   := $(BUILD)/libwprt_mpi.a
WPREF      := $(BUILD)/wp-ref
UNIT_BINS  := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
MPI_BINS   := $(patsubst tests/mpi/%.c,$(BUILD)/tests-mpi/%,$(MPI_TEST_SRC))
TOOL_BINS  := $(patsubst tests/tools/%.c,$(BUILD)/tools/%,$(TOOL_SRC))

GEN_LIBS := -ljansson -llua5.4 -lm -pthread
RT_LIBS  := $(BLAS_LIB) $(OPENMP) -ljansson -lm

all: $(BUILD)/config.mk $(WPGEN) $(LIBWPRT) $(WPREF) $(if $(RT_MPI_SRC),$(LIBWPMPI))

$(BUILD)/obj/generator/%.o: generator/%.c | $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LUA_INC) -Igenerator -Iruntime -c $< -o $@

$(call obj,$(RT_MPI_SRC)): $(BUILD)/obj/%.o: %.c | $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS) $(OPENMP) $(BLAS_INC) -Iruntime -c $< -o $@

$(BUILD)/obj/runtime/%.o: runtime/%.c | $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(OPENMP) $(BLAS_INC) -Iruntime -c $< -o $@

$(BUILD)/obj/tests/%.o: tests/%.c | $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(OPENMP) $(LUA_INC) -Igenerator -Iruntime -Itests -c $< -o $@

$(LIBWPGEN): $(call obj,$(GEN_LIBSRC) $(SHARED_SRC))
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(LIBWPRT): $(call obj,$(RT_SRC))
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(LIBWPMPI): $(call obj,$(RT_MPI_SRC))
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(WPGEN): $(BUILD)/obj/generator/cli/main.o $(LIBWPGEN)
	$(CC) $^ -o $@ $(GEN_LIBS)

# The reference trainer knows the same model presets as wpgen (runtime/common/modelcfg.c).
$(WPREF): $(call obj,$(wildcard runtime/ref/*.c)) $(LIBWPRT)
	$(CC) $^ -o $@ $(RT_LIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(LIBWPGEN) $(LIBWPRT)
	@mkdir -p $(@D)
	$(CC) $^ -o $@ $(GEN_LIBS) $(RT_LIBS)

# MPI test programs: run by the scripts in tests/mpi/ under mpirun.
$(BUILD)/tests-mpi/%: tests/mpi/%.c $(LIBWPMPI) $(LIBWPRT) | $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(MPICC) $(CFLAGS) $(OPENMP) -Iruntime -Itests $< -o $@ $(LIBWPMPI) $(LIBWPRT) $(RT_LIBS)

# Helpers of the test scripts (checkpoint comparison, ...).
$(BUILD)/tools/%: $(BUILD)/obj/tests/tools/%.o $(LIBWPRT)
	@mkdir -p $(@D)
	$(CC) $^ -o $@ $(RT_LIBS)

test: all $(UNIT_BINS) $(MPI_BINS) $(TOOL_BINS)
	@./tests/run.sh $(BUILD)

demo: all
	@./scripts/demo.sh $(BUILD)

bench-gen: all
	@./scripts/bench_gen.sh $(BUILD)

bench-cpu: all
	@./scripts/bench_cpu.sh $(BUILD)

bench-sim: all
	@./scripts/bench_sim.sh $(BUILD)

clean:
	rm -rf $(BUILD)

# libFuzzer harnesses: `make fuzz` (clang; FUZZ_SECONDS per target). See tests/fuzz/fuzz.mk.
include tests/fuzz/fuzz.mk

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
