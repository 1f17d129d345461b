${P.first_hash}
${P.header_hash}
#
# Builds ./train: the unrolled step of every rank (rank_*.c), the plan's tables (plan_desc.c,
# main.c) and the wpgen runtime, copied into runtime/ so that this directory stands alone.
# `make -j$(nproc)` compiles the ranks in parallel; `make clean` removes what make made.

CC      = mpicc
OPT     = -O2
# The steps are straight-line calls with constant arguments: optimizing them gains nothing
# and, for long plans, costs the compiler seconds and hundreds of MB per rank.
RANKOPT = -O0
CFLAGS  = -fopenmp -std=c11 -D_GNU_SOURCE -I. -Iruntime -I/usr/include/x86_64-linux-gnu/openblas-pthread
LDLIBS  = -lopenblas -ljansson -lm
@ if P.backend == "cuda" then
NVCC    = nvcc
NVFLAGS = -O2 -Iruntime
LDLIBS += -L/usr/local/cuda/lib64 -lcudart -lcublasLt -lcublas -lnccl
@ end

SRC     = $(sort $(wildcard rank_*.c)) plan_desc.c main.c $(wildcard runtime/common/*.c runtime/train/*.c runtime/cpu/*.c runtime/mpi/*.c)
OBJ     = $(SRC:%.c=obj/%.o)
@ if P.backend == "cuda" then
CUSRC   = $(wildcard runtime/cuda/*.cu)
OBJ    += $(CUSRC:%.cu=obj/%.o)
@ end
HDR     = plan.h $(wildcard runtime/*/*.h)

train: $(OBJ)
	$(CC) $(OPT) $(CFLAGS) $(OBJ) -o $@ $(LDLIBS)

obj/rank_%.o: rank_%.c plan.h runtime/common/step.h
	@mkdir -p $(@D)
	$(CC) $(RANKOPT) $(CFLAGS) -c $< -o $@

obj/%.o: %.c $(HDR)
	@mkdir -p $(@D)
	$(CC) $(OPT) $(CFLAGS) -c $< -o $@
@ if P.backend == "cuda" then

obj/%.o: %.cu $(HDR)
	@mkdir -p $(@D)
	$(NVCC) $(NVFLAGS) -c $< -o $@
@ end

clean:
	rm -rf obj train

.PHONY: clean
