# The NCCL communication backend (runtime/hostmpi, runtime/nccl), its part of an emitted Makefile:
# NCCL between GPU buffers, bootstrapped over MPI, so everything is compiled and linked by MPI's
# compiler wrapper (`make MPICC=...` names another). nccl.h is found when make runs: in CUDA_HOME's
# include folder, else /usr/include; `make NCCL_HOME=DIR` (DIR/include, DIR/lib: pip's nvidia-nccl
# wheel, say) overrides, and NCCL_LIBS the link flags.
MPICC ?= mpicc
CC = $(MPICC)
CUDA_HOME ?= $(or $(patsubst %/bin/nvcc,%,$(realpath $(shell command -v nvcc 2>/dev/null))),/usr/local/cuda)
ifdef NCCL_HOME
NCCL_CFLAGS ?= -I$(NCCL_HOME)/include
NCCL_LIBS ?= -L$(NCCL_HOME)/lib -Wl,-rpath,$(NCCL_HOME)/lib $(if $(wildcard $(NCCL_HOME)/lib/libnccl.so),-lnccl,-l:libnccl.so.2)
else
NCCL_HEADER := $(firstword $(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h))
ifeq ($(NCCL_HEADER),)
$(error the NCCL backend needs nccl.h: not in $(CUDA_HOME)/include nor /usr/include (make NCCL_HOME=DIR))
endif
NCCL_CFLAGS ?= -I$(dir $(NCCL_HEADER))
NCCL_LIBS ?= -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lnccl
endif

CFLAGS += -I$(CUDA_HOME)/include $(NCCL_CFLAGS)
LDLIBS += $(NCCL_LIBS) -L$(CUDA_HOME)/lib64 -lcudart -lpthread
