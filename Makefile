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
.PHONY: all deps test demo bench-gen bench-cpu bench-sim bench-scale clean

# The probe runs once; delete build/config.mk to run it again. It sets BLAS_CFLAGS and BLAS_LIBS.
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
RT_LIBS  := $(BLAS_LIBS) $(OPENMP) -ljansson -lm

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
$(eval $(call runtime_lib,mpi,$(MPICC)))
# ar keeps one member per file name: the runtime's file names must differ across its folders
ifneq ($(words $(notdir $(RT_OBJ))),$(words $(sort $(notdir $(RT_OBJ)))))
$(error two runtime folders have a source file of the same name: $(sort $(notdir $(RT_OBJ))))
endif
LIBWPRT := $(BUILD)/libwprt.a
$(LIBWPRT): $(RT_ARCHIVES)
	rm -f $@ && ar rcs $@ $(RT_OBJ)

all: $(BUILD)/config.mk $(WPGEN) $(LIBWPRT) $(WPREF)

$(BUILD)/obj/generator/%.o: generator/%.c | $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LUA_INC) -Igenerator -Iruntime -c $< -o $@

$(BUILD)/obj/tests/%.o: tests/%.c | $(BUILD)/config.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(OPENMP) $(LUA_INC) -Igenerator -Iruntime -Itests -c $< -o $@

$(LIBWPGEN): $(call obj,$(GEN_LIBSRC) $(SHARED_SRC))
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(WPGEN): $(BUILD)/obj/generator/cli/main.o $(LIBWPGEN)
	$(CC) $^ -o $@ $(GEN_LIBS)

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

bench-scale: all
	@./scripts/bench_scale.sh $(BUILD)

clean:
	rm -rf $(BUILD)

# libFuzzer harnesses: `make fuzz` (clang; FUZZ_SECONDS per target). See tests/fuzz/fuzz.mk.
include tests/fuzz/fuzz.mk

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
