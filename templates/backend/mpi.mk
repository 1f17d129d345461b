# The MPI communication backend (runtime/hostmpi, runtime/mpi), its part of an emitted Makefile:
# everything is compiled and linked by MPI's compiler wrapper, which knows where MPI's headers and
# libraries are (`make MPICC=...` names another one).
MPICC ?= mpicc
CC = $(MPICC)
