# cli/: the ktune binary's subcommands
CLI_SRCS += cli/main.c cli/cli.c cli/cmd_info.c cli/cmd_sweep.c cli/cmd_replay.c cli/cmd_run.c \
	cli/cmd_env.c
TESTS += test_cli

# The project's own measured H200 results, compiled in: what `ktune run`
# serves on a machine without a GPU.
$(BUILD)/obj/cli/cmd_run.o: $(BUILD)/shipped_results.h
$(BUILD)/shipped_results.h: data/h200-results.json $(BUILD)/embed
	@echo "  EMBED   $<"
	$(Q)$(BUILD)/embed -s $@ kt_shipped_results $<

# The commit the binary was built from (`ktune --version`; the bench scripts
# label their results with it): git describe of the checkout, "-dirty" when
# tracked files differ from it, "unknown" outside a git checkout. Rewritten
# only when it changes, so an unchanged tree relinks nothing.
$(BUILD)/obj/cli/main.o: $(BUILD)/build_commit.h
$(BUILD)/build_commit.h: FORCE
	@mkdir -p $(@D)
	$(Q)c=$$(git describe --always --dirty --abbrev=7 --exclude '*' 2>/dev/null || echo unknown); \
	printf '#define KT_BUILD_COMMIT "%s"\n' "$$c" >$@.tmp; \
	if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
.PHONY: FORCE
FORCE:
