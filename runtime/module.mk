# runtime/: libktune, the launch runtime (include/ktune.h), and the leaves it
# shares with the rest of ktune (the driver loader, NVRTC compile-one, the
# lookup chain).
LIB_SRCS += runtime/cu_api.c runtime/jit_one.c runtime/chain.c runtime/api.c runtime/table.c \
	runtime/plan.c runtime/launch.c runtime/callcache.c runtime/json_min.c runtime/table_db.c

# libktune: the runtime alone, without the tuner, the store, the server,
# SQLite, libmicrohttpd or jansson. NVRTC and the driver are dlopen'd, so it
# loads where neither is installed. Position-independent objects of its own
# (build/pic/) serve both the archive and the shared library, which exports
# the ktune_* symbols only.
RT_SRCS = runtime/api.c runtime/table.c runtime/plan.c runtime/launch.c runtime/callcache.c \
	runtime/json_min.c runtime/cu_api.c runtime/jit_one.c runtime/chain.c \
	kernels/family.c kernels/registry.c kernels/gemm_plan.c kernels/dense.c kernels/lowrank.c \
	kernels/monarch.c kernels/blast.c kernels/blockattn.c kernels/selftest.c \
	templates/templates.c util/err.c util/hash.c util/clock.c util/knobs.c
RT_OBJS = $(patsubst %.c,$(BUILD)/pic/%.o,$(RT_SRCS)) $(BUILD)/pic/templates_gen.o
RT_LIBS = -ldl -lm -pthread

runtime: $(BUILD)/libktune.a $(BUILD)/libktune.so $(BUILD)/libktune_db.a

$(BUILD)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $< (pic)"
	$(Q)$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -fPIC -c -o $@ $<

$(BUILD)/pic/templates_gen.o: $(BUILD)/templates_gen.c
	@mkdir -p $(dir $@)
	@echo "  CC      $< (pic)"
	$(Q)$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -fPIC -c -o $@ $<

$(BUILD)/libktune.a: $(RT_OBJS)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

# --no-undefined: everything it needs is in it or in libc, libdl, libm
# (not checked under a sanitizer, whose runtime the program brings).
$(BUILD)/libktune.so: $(RT_OBJS) runtime/libktune.map
	@echo "  LD      $@"
	$(Q)$(CC) -shared $(filter-out -Wl$(comma)-rpath%,$(LDFLAGS)) -Wl,-soname,libktune.so \
		-Wl,--version-script=runtime/libktune.map $(if $(SANITIZE),,-Wl$(comma)--no-undefined) \
		-o $@ $(RT_OBJS) $(RT_LIBS)

comma := ,

# libktune_db: ktune_open_db (include/ktune_db.h) and the store it reads;
# link it before libktune.a, with -lsqlite3.
RT_DB_OBJS = $(BUILD)/pic/runtime/table_db.o $(BUILD)/pic/db/store.o
$(BUILD)/pic/db/store.o: $(BUILD)/schema_sql.h

$(BUILD)/libktune_db.a: $(RT_DB_OBJS)
	@echo "  AR      $@"
	$(Q)rm -f $@ && ar rcs $@ $^

# The runtime's own sources, packed into ktune (runtime/sources.h): an
# export bundle (`ktune export --format lib`) builds them, with its
# Makefile (runtime/bundle.mk) and check (runtime/bundle_check.c).
RT_HDRS = include/ktune.h include/ktune_builtin.h runtime/rt.h runtime/callcache.h runtime/chain.h \
	runtime/cu_api.h runtime/jit_one.h runtime/json_min.h runtime/sources.h kernels/family.h kernels/gemm_plan.h \
	kernels/blockattn.h util/err.h util/hash.h util/clock.h util/knobs.h templates/templates.h
RT_PACK = $(RT_SRCS) $(RT_HDRS) runtime/libktune.map runtime/bundle.mk runtime/bundle_check.c \
	runtime/bundle_gpu.c tools/embed.c
EXTRA_LIB_OBJS += $(BUILD)/obj/runtime_src_gen.o

$(BUILD)/runtime_src_gen.c: $(BUILD)/embed $(RT_PACK)
	@echo "  PACK    libktune's sources"
	$(Q)$(BUILD)/embed -r $@ $(RT_PACK)

$(BUILD)/obj/runtime_src_gen.o: $(BUILD)/runtime_src_gen.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -c -o $@ $<
