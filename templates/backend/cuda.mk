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
LDLIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcudart -lstdc++ -lpthread -ldl
OBJ += $(patsubst %.cu,obj/%.o,$(wildcard runtime/cuda/*.cu))

obj/runtime/cuda/%.o: runtime/cuda/%.cu $(RTHDR) $(BUILD)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -I. -Iruntime -c $< -o $@

# cuDNN's fused attention (runtime/cuda/attention_cudnn.cu), when the cudnn-frontend headers and
# cudnn.h are found: CUDNN_FRONTEND_INCLUDE, else where wpgen's scripts/deps.sh keeps them
# (~/.cache/wpgen); cudnn.h in the toolkit, /usr/include or PyTorch's nvidia-cudnn wheel, whose
# lib/ the program also searches for libcudnn.so.9 (loaded at run time, never linked). Without
# them, or with `make CUDNN=no`, the file builds without cuDNN and the program uses its own
# attention kernels, saying so at start-up.
CUDNN_FRONTEND_INCLUDE ?= $(firstword $(wildcard $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/wpgen/cudnn-frontend-1.23.0/include))
CUDNN_WHEEL := $(shell python3 -c 'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])' 2>/dev/null)
CUDNN_INCLUDE ?= $(patsubst %/cudnn.h,%,$(firstword $(wildcard $(CUDA_HOME)/include/cudnn.h /usr/include/cudnn.h \
                  /usr/include/x86_64-linux-gnu/cudnn.h $(if $(CUDNN_WHEEL),$(CUDNN_WHEEL)/include/cudnn.h))))
CUDNN_LIBDIR := $(if $(wildcard $(CUDNN_WHEEL)/lib/libcudnn.so.9),$(CUDNN_WHEEL)/lib)
ifneq ($(CUDNN),no)
ifneq ($(and $(wildcard $(CUDNN_FRONTEND_INCLUDE)/cudnn_frontend.h),$(CUDNN_INCLUDE)),)
CUDNN_FLAGS := -DWP_HAVE_CUDNN -DNV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING -DCUDNN_FRONTEND_SKIP_JSON_LIB \
               -I$(CUDNN_FRONTEND_INCLUDE) -I$(CUDNN_INCLUDE) $(if $(CUDNN_LIBDIR),-DWP_CUDNN_LIBDIR='"$(CUDNN_LIBDIR)"')
endif
endif
obj/runtime/cuda/attention_cudnn.o: runtime/cuda/attention_cudnn.cu $(RTHDR) $(BUILD)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) $(CUDNN_FLAGS) -I. -Iruntime -c $< -o $@
