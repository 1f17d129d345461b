${P.first_build}
${P.header_hash}
#
# Builds ./train: the unrolled step of every rank (rank_*.c), the plan's tables (plan_desc.c,
# main.c) and the wpgen runtime, copied into runtime/ so that this directory stands alone. The
# runtime is the backend-neutral training program (runtime/common, runtime/train) and the
# backends this directory was emitted for: compute ${P.backend} and communication ${P.comm}, each a
# folder of runtime/ and its part of this Makefile in runtime/backend/ (compiler, flags and
# libraries, found on this machine when make runs). `make -j$(nproc)` compiles the ranks in
# parallel; `make clean` removes what make made. Emitting again over this folder keeps obj/
# and the times of the files that did not change, so make then compiles only what did (the
# ranks, the plan's tables); this file names no plan so that it is one of those.

CC      = cc
OPT     = -O2
# The steps are straight-line calls with constant arguments: optimizing them gains nothing
# and, for long plans, costs the compiler seconds and hundreds of MB per rank.
RANKOPT = -O0
CFLAGS  = -std=c11 -D_GNU_SOURCE -pthread -I. -Iruntime
LDLIBS  = -ljansson -lm -pthread
SRC     = $(sort $(wildcard rank_*.c)) plan_desc.c main.c $(wildcard runtime/*/*.c)
OBJ     =

# What an object depends on besides its source: the runtime's headers (never plan.h: the runtime
# is the same for every plan), and the build's own settings, so that other flags rebuild it.
RTHDR   = $(wildcard runtime/*/*.h)
BUILD   = Makefile runtime/backend/${P.backend}.mk runtime/backend/${P.comm}.mk

# Each backend's part adds to CC, CFLAGS, LDLIBS and OBJ (and may add rules for its own files,
# which must not become the default goal).
.DEFAULT_GOAL := train
include runtime/backend/${P.backend}.mk runtime/backend/${P.comm}.mk

OBJ    += $(SRC:%.c=obj/%.o)

train: $(OBJ)
	$(CC) $(OPT) $(CFLAGS) $(OBJ) -o $@ $(LDLIBS)

obj/rank_%.o: rank_%.c plan.h runtime/common/step.h $(BUILD)
	@mkdir -p $(@D)
	$(CC) $(RANKOPT) $(CFLAGS) -c $< -o $@

obj/runtime/%.o: runtime/%.c $(RTHDR) $(BUILD)
	@mkdir -p $(@D)
	$(CC) $(OPT) $(CFLAGS) -c $< -o $@

obj/%.o: %.c plan.h $(RTHDR) $(BUILD)
	@mkdir -p $(@D)
	$(CC) $(OPT) $(CFLAGS) -c $< -o $@

clean:
	rm -rf obj train

.PHONY: clean
