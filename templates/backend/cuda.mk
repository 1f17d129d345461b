# The CUDA compute backend (runtime/cuda), its part of an emitted Makefile: bf16 on the GPU,
# matrix products through cuBLASLt, kernels of our own (runtime/cuda/*.cu, compiled by nvcc for
# sm_80 and sm_90). The toolkit is found when make runs: nvcc in PATH, else CUDA_HOME
# (/usr/local/cuda); `make CUDA_HOME=/opt/cuda` or `make NVCC=... CUDA_ARCH=...` override.
CUDA_HOME ?= $(or $(patsubst %/bin/nvcc,%,$(realpath $(shell command -v nvcc 2>/dev/null))),/usr/local/cuda)
NVCC ?= $(CUDA_HOME)/bin/nvcc
ifeq ($(shell command -v $(NVCC) 2>/dev/null),)
$(error the CUDA backend needs nvcc: not in PATH nor at $(NVCC) (make CUDA_HOME=/path/to/cuda))
endif
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
NVCCFLAGS ?= -O3 -std=c++17 $(CUDA_ARCH)

CFLAGS += -I$(CUDA_HOME)/include
LDLIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcudart -lstdc++ -lpthread
OBJ += $(patsubst %.cu,obj/%.o,$(wildcard runtime/cuda/*.cu))

obj/runtime/cuda/%.o: runtime/cuda/%.cu $(wildcard runtime/*/*.h)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -I. -Iruntime -c $< -o $@
