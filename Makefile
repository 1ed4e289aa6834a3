# bert — build, test and install.  `make` builds build/bert/core.so;
# `make test` installs the missing packages it needs, builds, and runs the fast specs.

LUA          ?= lua5.4
LUA_VERSION  ?= 5.4
LUA_INCDIR   ?= /usr/include/lua$(LUA_VERSION)
OPENBLAS_INC ?= $(shell pkg-config --cflags-only-I openblas 2>/dev/null)
OPENBLAS_LIB ?= $(shell pkg-config --libs openblas 2>/dev/null || echo -lopenblas)

# Install locations (LuaRocks overrides these with its staging tree).
PREFIX       ?= /usr/local
LIBDIR       ?= $(PREFIX)/lib/lua/$(LUA_VERSION)
LUADIR       ?= $(PREFIX)/share/lua/$(LUA_VERSION)
BINDIR       ?= $(PREFIX)/bin
# The `bert` command (bin/bert) finds the scripts it runs in BINDIR/../share/bert.
SHAREDIR     := $(BINDIR)/../share/bert
# What the scripts behind `bert` need: fetch and export helpers.
SHARE_TOOLS  := $(wildcard tools/fetch_*.sh) tools/data_sha256.txt tools/build_corpus.lua \
                tools/spam_convert.lua tools/udhr_text.lua tools/diatheke_text.lua tools/quran_text.lua \
                tools/fortune_text.lua tools/manpage_text.lua tools/html_text.lua tools/make_synthetic_qa.lua \
                tools/export_onnx.lua tools/onnx_run.js

CC           ?= gcc
CFLAGS       ?= -O3 -march=native
WARN         := -std=c11 -Wall -Wextra -pedantic -Wshadow -Wstrict-prototypes \
                -Wmissing-prototypes -Wno-unused-parameter
# Symbols are hidden: the module exports only its Lua entry point,
# luaopen_bert_core (csrc/lua/core.c, compiled with default visibility).
# -fno-trapping-math: nothing here unmasks floating-point traps, and with
# traps assumed GCC 12 will not if-convert a float compare (the clamps in
# nn_expf) without AVX-512's masks: every loop calling nn_expf (GELU,
# softmax, cross-entropy, LSTM gates) stayed scalar on AVX2 machines.
BERT_CFLAGS  := $(CFLAGS) $(WARN) -fPIC -fopenmp -fno-math-errno -fno-trapping-math -D_GNU_SOURCE -fvisibility=hidden \
                -I$(LUA_INCDIR) $(OPENBLAS_INC) -Icsrc
LIBFLAG      ?= -shared
LIBS         := $(OPENBLAS_LIB) -lutf8proc -ldl -lm -fopenmp

BUILD        ?= build
SRCS         := $(wildcard csrc/*.c csrc/*/*.c)
OBJS         := $(patsubst csrc/%.c,$(BUILD)/obj/%.o,$(SRCS))
MODULE       := $(BUILD)/bert/core.so

# Vulkan: shaders/*.comp compiled by glslc and embedded into the module
# (tools/embed_shaders.lua); the loader is opened with dlopen at run time.
# Without glslc or the headers the module builds without Vulkan.
GLSLC        ?= $(shell command -v glslc 2>/dev/null)
VK_HEADER    := $(wildcard /usr/include/vulkan/vulkan.h)
SHADERS      := $(wildcard shaders/*.comp)
SPVS         := $(patsubst shaders/%.comp,$(BUILD)/spv/%.spv,$(SHADERS))
ifeq ($(GLSLC),)
BERT_CFLAGS  += -DBERT_NO_VULKAN -DBERT_NO_GLSLC
else ifeq ($(VK_HEADER),)
BERT_CFLAGS  += -DBERT_NO_VULKAN
else
OBJS         += $(BUILD)/obj/gen/vk_shaders.o
endif
BUSTED       := $(LUA) /usr/bin/busted

.PHONY: FORCE all deps deps-test deps-demo test test-all test-asan fuzz fuzz-deps fuzz-smoke fuzz-campaign demo tour bench install uninstall clean

all: $(MODULE)

# The compiler and its flags, rewritten only when they change: objects depend
# on it, so a new flag (or CFLAGS=...) rebuilds them instead of linking stale ones.
$(BUILD)/cflags: FORCE
	@mkdir -p $(dir $@)
	@echo '$(CC) $(BERT_CFLAGS)' | cmp -s - $@ || echo '$(CC) $(BERT_CFLAGS)' > $@

$(BUILD)/obj/%.o: csrc/%.c $(wildcard csrc/*.h csrc/*/*.h) $(BUILD)/cflags
	@mkdir -p $(dir $@)
	$(CC) $(BERT_CFLAGS) -c $< -o $@


# The elementwise opcodes come from the op list (csrc/core/op_list.h).
$(BUILD)/gen/bert_ops.glsl: tools/gen_op_glsl.c csrc/core/op_list.h csrc/vulkan/vk_opcodes.h
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -Icsrc -o $(BUILD)/gen/gen_op_glsl tools/gen_op_glsl.c
	$(BUILD)/gen/gen_op_glsl > $@

$(BUILD)/spv/%.spv: shaders/%.comp $(wildcard shaders/*.glsl) csrc/vulkan/vk_opcodes.h $(BUILD)/gen/bert_ops.glsl
	@mkdir -p $(dir $@)
	$(GLSLC) -fshader-stage=compute --target-env=vulkan1.1 -O -Icsrc/vulkan -I$(BUILD)/gen $< -o $@

$(BUILD)/gen/vk_shaders.c: $(SPVS) tools/embed_shaders.lua
	@mkdir -p $(dir $@)
	$(LUA) tools/embed_shaders.lua $@ $(SPVS)

$(BUILD)/obj/gen/vk_shaders.o: $(BUILD)/gen/vk_shaders.c $(BUILD)/cflags
	@mkdir -p $(dir $@)
	$(CC) $(BERT_CFLAGS) -c $< -o $@

$(MODULE): $(OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LIBFLAG) -o $@ $(OBJS) $(LIBS)

# `make deps` installs everything; `make test` and `make demo` only what they
# use (the specs that need the rest skip, saying how to install it), and
# everything under CI (CI=true).
deps:
	@sh tools/deps.sh all

deps-test deps-demo:
	@sh tools/deps.sh $(if $(filter true,$(CI)),all,$(@:deps-%=%))

# `make test` skips the cases tagged #slow (stress sizes, end-to-end runs of
# the experiment scripts, MPI launches, long trainings: docs/testing.md);
# `make test-all` runs every case, as CI does.
test: deps-test
	@$(MAKE) --no-print-directory all
	$(BUSTED) -o plainTerminal --exclude-tags=slow spec

test-all: deps
	@$(MAKE) --no-print-directory all
	$(BUSTED) -o plainTerminal spec

# AddressSanitizer + UBSan: a separate build tree; libasan must be preloaded
# because the host (lua5.4) is not instrumented.  float-cast-overflow is not
# part of gcc's -fsanitize=undefined: NaN or 1e300 converted to an integer.
test-asan: deps-test
	@$(MAKE) --no-print-directory all BUILD=build-asan \
	  CFLAGS="-O1 -g -fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer -fno-sanitize-recover=undefined,float-cast-overflow" \
	  LIBFLAG="-shared -fsanitize=address,undefined,float-cast-overflow"
	BERT_BUILD=build-asan ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
	  LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
	  $(BUSTED) -o plainTerminal spec

# Fuzzing (docs/fuzzing.md): libFuzzer targets built with clang against
# an instrumented copy of the whole C core in build-fuzz (no Vulkan).
# fuzz-smoke runs each target for FUZZ_SMOKE_SECONDS from its seed corpus.
FUZZ_CC      ?= clang
FUZZ_BUILD   := build-fuzz
FUZZ_SAN     := -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=undefined,float-cast-overflow
FUZZ_CFLAGS  := -g -O1 -fno-omit-frame-pointer $(FUZZ_SAN) -fsanitize=fuzzer-no-link \
                -std=c11 -fPIC -fopenmp -fno-math-errno -D_GNU_SOURCE -DBERT_NO_VULKAN -DBERT_NO_GLSLC \
                -Wno-pass-failed -I$(LUA_INCDIR) $(OPENBLAS_INC) -Icsrc
FUZZ_LIBS    := $(OPENBLAS_LIB) -lutf8proc -llua$(LUA_VERSION) -ldl -lm -fopenmp -rdynamic
FUZZ_OBJS    := $(patsubst csrc/%.c,$(FUZZ_BUILD)/obj/%.o,$(SRCS))
FUZZ_C_TARGETS   := safetensors shard
FUZZ_LUA_TARGETS := tokenizer_files encode config
FUZZ_TARGETS := $(FUZZ_C_TARGETS) $(FUZZ_LUA_TARGETS)
FUZZ_BINS    := $(addprefix $(FUZZ_BUILD)/fuzz_,$(FUZZ_TARGETS))
FUZZ_SMOKE_SECONDS ?= 15

$(FUZZ_BUILD)/obj/%.o: csrc/%.c $(wildcard csrc/*.h csrc/*/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

$(addprefix $(FUZZ_BUILD)/fuzz_,$(FUZZ_C_TARGETS)): $(FUZZ_BUILD)/fuzz_%: fuzz/%.c $(FUZZ_OBJS)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< $(FUZZ_OBJS) $(FUZZ_LIBS) -o $@

$(addprefix $(FUZZ_BUILD)/fuzz_,$(FUZZ_LUA_TARGETS)): $(FUZZ_BUILD)/fuzz_%: fuzz/lua_target.c fuzz/lua/%.lua $(FUZZ_OBJS)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -DFUZZ_SCRIPT='"fuzz/lua/$*.lua"' $< $(FUZZ_OBJS) $(FUZZ_LIBS) -o $@

fuzz-deps:
	@sh tools/deps.sh fuzz

fuzz: fuzz-deps
	@$(MAKE) --no-print-directory $(FUZZ_BINS)

fuzz-smoke: fuzz
	@sh fuzz/run.sh smoke $(FUZZ_SMOKE_SECONDS) $(FUZZ_TARGETS)

# The longer campaign: FUZZ_RUNS executions per target, one target at a time.
FUZZ_RUNS ?= 1000000
fuzz-campaign: fuzz
	@sh fuzz/run.sh campaign $(FUZZ_RUNS) $(FUZZ_TARGETS)

# The main job: pretrain a small BERT on the Brown corpus (MLM + NSP),
# evaluate it, then fine-tune it and the same model from scratch on spam
# detection in the low-data setting where pretraining pays (1,000 labelled
# mails; the learning rate defaults by model size: 1e-3 for tiny), the same
# number of steps each, beside the majority-class baseline; everything lands
# in runs/demo.  By default a fixed amount of work, so that the figures are
# the same on every machine: DEMO_STEPS pretraining steps (5,000: the whole
# demo took 385 s on a quiet 2-core AMD EPYC, 2026-12-05, 52k tokens/s; 500
# steps left NSP at chance) and 2 epochs of fine-tuning (64 steps).
# DEMO_BUDGET=SECONDS instead fits the work to a time budget (80%
# pretraining, 6% for each fine-tuning run).  A rerun replaces the last
# demo's results (--overwrite: it says what it replaces).
DEMO_STEPS  ?= 5000
DEMO_BUDGET ?=
DEMO_MODEL  ?= tiny
DEMO_PRETRAIN_LENGTH = $(if $(DEMO_BUDGET),--time-budget $$(( $(DEMO_BUDGET) * 80 / 100 )),--steps $(DEMO_STEPS))
DEMO_FINETUNE_LENGTH = $(if $(DEMO_BUDGET),--epochs 3 --time-budget $$(( $(DEMO_BUDGET) * 6 / 100 > 20 ? $(DEMO_BUDGET) * 6 / 100 : 20 )),--epochs 2)
demo: deps-demo
	@$(MAKE) --no-print-directory all
	$(LUA) experiments/pretrain.lua --model $(DEMO_MODEL) --corpus brown --tokenizer wordpiece \
	  --vocab-size 8000 --seq-len 128 --batch-size 32 $(DEMO_PRETRAIN_LENGTH) \
	  --eval-every 250 --max-eval 640 --save-every 250 --overwrite --output runs/demo
	$(LUA) experiments/finetune_classify.lua --task spam --model runs/demo/checkpoint --compare \
	  --max-train 1000 $(DEMO_FINETUNE_LENGTH) --overwrite --output runs/demo/finetune-spam

tour: all
	$(LUA) tools/demo.lua

bench: all
	$(LUA) tools/bench_gemm.lua

install: all
	install -d $(DESTDIR)$(LIBDIR)/bert $(DESTDIR)$(LUADIR)/bert $(DESTDIR)$(BINDIR) $(DESTDIR)$(SHAREDIR)/tools/lib
	install -m 755 $(MODULE) $(DESTDIR)$(LIBDIR)/bert/core.so
	cd lua && find bert -name '*.lua' -exec install -D -m 644 {} $(DESTDIR)$(LUADIR)/{} \;
	install -m 755 bin/bert $(DESTDIR)$(BINDIR)/bert
	find experiments -type f -exec install -D -m 644 {} $(DESTDIR)$(SHAREDIR)/{} \;
	install -m 644 $(SHARE_TOOLS) $(DESTDIR)$(SHAREDIR)/tools
	install -m 644 tools/lib/fetch_common.sh tools/lib/converter.lua $(DESTDIR)$(SHAREDIR)/tools/lib

uninstall:
	rm -rf $(DESTDIR)$(LIBDIR)/bert $(DESTDIR)$(LUADIR)/bert $(DESTDIR)$(BINDIR)/bert $(DESTDIR)$(SHAREDIR)

clean:
	rm -rf build build-asan build-fuzz
