# cli/: the ktune binary's subcommands
CLI_SRCS += cli/main.c cli/cli.c cli/cmd_info.c cli/cmd_sweep.c cli/cmd_run.c
TESTS += test_cli

# The project's own measured H200 results, compiled in: what `ktune run`
# serves on a machine without a GPU.
$(BUILD)/obj/cli/cmd_run.o: $(BUILD)/shipped_results.h
$(BUILD)/shipped_results.h: data/h200-results.json $(BUILD)/embed
	@echo "  EMBED   $<"
	$(Q)$(BUILD)/embed -s $@ kt_shipped_results $<
