# libFuzzer harnesses (tests/fuzz/fuzz_*.c), included by the top Makefile. Needs clang (Debian's
# clang package); nothing else in the build does.
#   make fuzz                     every target for FUZZ_SECONDS (default 60) each, one after another
#   make fuzz FUZZ_TARGETS=shard  only some
# Each runs niced, on one core, from its working corpus $(BUILD)/fuzz/corpus/NAME (seeded from
# tests/fuzz/seeds/NAME and the regression cases tests/fuzz/corpus/NAME); a crash leaves its input
# in $(BUILD)/fuzz/artifacts/NAME/ and stops make. Copy such an input into tests/fuzz/corpus/NAME/
# once it is fixed: unit/test_fuzz_corpus replays that folder in `make test` (no clang needed).
# Target data is Python: tests/fuzz/fuzz_data.py on wpgen data's reader (scripts/tokenize_data.py),
# coverage-guided with atheris where it is installed, else a random mutation of its seeds (its top
# comment says how); it needs no clang, and e2e/test_data_hostile.sh replays its folders.

FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= topology modelcfg safetensors shard dataspec manifest data
FUZZ_PYTHON  ?= python3
FUZZ_FLAGS   := -g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
                -Igenerator -Iruntime -Itests
# What each harness exercises.
FUZZ_SRC_topology    := generator/input/topology.c runtime/common/jsonfile.c
FUZZ_SRC_modelcfg    := runtime/common/modelcfg.c runtime/common/config.c runtime/common/jsonfile.c
FUZZ_SRC_safetensors := runtime/train/safetensors.c runtime/common/settings.c runtime/common/durable.c
FUZZ_SRC_shard       := runtime/train/data.c
FUZZ_SRC_dataspec    := runtime/train/data.c
FUZZ_SRC_manifest    := $(wildcard runtime/train/ckpt_*.c) runtime/train/checkpoint.c runtime/common/durable.c \
                        runtime/train/safetensors.c runtime/common/settings.c runtime/common/config.c \
                        runtime/common/optim.c runtime/common/modelcfg.c runtime/common/jsonfile.c
# How each target runs (data: the Python harness).
FUZZ_RUN_data        := $(FUZZ_PYTHON) tests/fuzz/fuzz_data.py
# The shipped topologies seed the topology target too.
FUZZ_SEEDS_topology  := topologies

.PHONY: fuzz fuzz-build
fuzz-build: $(foreach t,$(filter-out data,$(FUZZ_TARGETS)),$(BUILD)/fuzz/fuzz_$(t))

define FUZZ_RULE
$(BUILD)/fuzz/fuzz_$(1): tests/fuzz/fuzz_$(1).c tests/fuzz/fuzz.h $(FUZZ_SRC_$(1)) $(wildcard $(FUZZ_SRC_$(1):.c=.h))
	@mkdir -p $$(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) $$< $(FUZZ_SRC_$(1)) -o $$@ -ljansson -lm
endef
$(foreach t,topology modelcfg safetensors shard dataspec manifest,$(eval $(call FUZZ_RULE,$(t))))

fuzz: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	    mkdir -p $(BUILD)/fuzz/corpus/$$t $(BUILD)/fuzz/artifacts/$$t tests/fuzz/corpus/$$t; \
	    echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
	    run="$(BUILD)/fuzz/fuzz_$$t"; [ $$t = data ] && run="$(FUZZ_RUN_data)"; \
	    nice -n 19 $$run -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	        -artifact_prefix=$(BUILD)/fuzz/artifacts/$$t/ $(BUILD)/fuzz/corpus/$$t tests/fuzz/corpus/$$t \
	        tests/fuzz/seeds/$$t $(FUZZ_SEEDS_$$t) 2>$(BUILD)/fuzz/$$t.log || \
	        { tail -n 40 $(BUILD)/fuzz/$$t.log; exit 1; }; \
	    grep -aE '^stat::number_of_executed_units|^stat::new_units_added' $(BUILD)/fuzz/$$t.log | tr '\n' ' '; echo; \
	done
