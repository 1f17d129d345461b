# The CPU compute backend (runtime/cpu), its part of an emitted Makefile: fp32 on OpenMP threads,
# matrix products through OpenBLAS. OpenBLAS is found when make runs: pkg-config first, else the
# usual places of its cblas.h; `make BLAS_CFLAGS=-I... BLAS_LIBS="-L... -lopenblas"` overrides.
ifndef BLAS_LIBS
BLAS_CFLAGS := $(shell pkg-config --cflags openblas 2>/dev/null)
BLAS_LIBS := $(shell pkg-config --libs openblas 2>/dev/null)
endif
ifeq ($(strip $(BLAS_LIBS)),)
BLAS_HEADER := $(firstword $(wildcard /usr/include/*/openblas-pthread/cblas.h /usr/include/openblas/cblas.h \
                                      /usr/include/*/cblas.h /usr/include/cblas.h /usr/local/include/cblas.h \
                                      /opt/OpenBLAS/include/cblas.h))
BLAS_CFLAGS := $(if $(BLAS_HEADER),-I$(patsubst %/,%,$(dir $(BLAS_HEADER))))
BLAS_LIBS := $(if $(findstring /opt/OpenBLAS/,$(BLAS_HEADER)),-L/opt/OpenBLAS/lib) -lopenblas
endif

CFLAGS += -fopenmp $(BLAS_CFLAGS)
LDLIBS += $(BLAS_LIBS)
